"""The lesson page the page tests share: built once per process on a grid that still reaches N = 1,024."""
from functools import lru_cache

LESSON_GRID = (1, 2, 8, 64, 1024)  # includes the lesson's N = 8, 64 and 1,024
LESSON_RANKS, LESSON_SEED = 4, 0


@lru_cache(maxsize=None)
def _lesson_data() -> dict:
    from zero_stages.lesson.page import lesson_data
    return lesson_data(LESSON_RANKS, LESSON_SEED, ranks_grid=LESSON_GRID)


@lru_cache(maxsize=None)
def lesson_page(lang: str = "en") -> tuple[str, dict]:
    """(the page in ``lang``, the data it embeds); one set of runs for both languages."""
    from ringemu.views import page_html
    data = _lesson_data()
    return page_html(data, lang), data
