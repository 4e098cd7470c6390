"""The lesson page the page tests share: built once per process on a grid that still reaches N = 1,024."""
from functools import lru_cache

LESSON_GRID = (1, 2, 8, 64, 1024)  # includes the lesson's N = 8, 64 and 1,024
LESSON_RANKS, LESSON_SEED = 8, 0  # the lesson's N, as the default page has it


@lru_cache(maxsize=None)
def _memory() -> dict:
    from zero_stages.lesson.memory_grid import memory_panel
    return memory_panel(LESSON_GRID)


@lru_cache(maxsize=None)
def lesson_data_for(n_ranks: int = LESSON_RANKS) -> dict:
    """The page's data at ``n_ranks`` (one memory grid for every N)."""
    from zero_stages.lesson.page import lesson_data
    return lesson_data(n_ranks, LESSON_SEED, memory=_memory())


@lru_cache(maxsize=None)
def lesson_page(lang: str = "en", n_ranks: int = LESSON_RANKS) -> tuple[str, dict]:
    """(the page in ``lang``, the data it embeds); one set of runs for both languages."""
    from ringemu.views import page_html
    data = lesson_data_for(n_ranks)
    return page_html(data, lang), data
