/* The lesson page. Every number shown is read from the embedded JSON (produced by ringemu runs); this script
   only looks values up, places them and reacts to the controls. No network, no external files. */
(function () {
  "use strict";
  function $(root, role) { return root.querySelector('[data-role="' + role + '"]'); }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) { if (attrs[k] !== null && attrs[k] !== undefined) e.setAttribute(k, attrs[k]); }
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function Page(root, data) {
    this.root = root; this.data = data; this.lang = data.lang || "en";
    this.mem = data.memory ? { preset: 0, stage: 0, n: null, rc: null, term: null } : null;
    this.st = data.stepper ? { alg: data.stepper["default"], step: 0 } : null;
  }
  Page.prototype.L = function (key, fallback) {
    var t = this.data.labels[this.lang];
    return (t && t[key] !== undefined) ? t[key] : (fallback !== undefined ? fallback : key);
  };
  Page.prototype.T = function (obj) { return (obj && typeof obj === "object") ? (obj[this.lang] || obj.en) : obj; };
  /* a label with its {name} places filled from params */
  Page.prototype.F = function (key, params) {
    var t = this.L(key);
    return t.replace(/\{(\w+)\}/g, function (m, k) { return (params && params[k] !== undefined) ? String(params[k]) : m; });
  };
  /* an integer in the page's language (zh-CN and en-US both group by thousands) */
  Page.prototype.N = function (n) { return Number(n).toLocaleString(this.lang === "zh" ? "zh-CN" : "en-US"); };
  function reducedMotion() {
    return !!(window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches);
  }

  /* ---------------- answers typed by a reader ----------------
     parseAnswer(text) -> {value, unit} or null: thousands separators (, ， _ and spaces between digits), a
     fraction a/b, a decimal or exponent, and a unit word after it ("B", "bytes", "字节", "GB", "×", "倍", "%"). */
  function parseAnswer(text) {
    var t = String(text).trim().replace(/[，,_](?=\d{3}(\D|$))/g, "").replace(/(\d)\s+(?=\d{3}(\D|$))/g, "$1")
      .replace(/[０-９]/g, function (d) { return String.fromCharCode(d.charCodeAt(0) - 0xFEE0); }).replace(/．/g, ".");
    var m = /^([+-]?\d+(?:\.\d*)?(?:e[+-]?\d+)?|[+-]?\.\d+)\s*(?:\/\s*(\d+(?:\.\d*)?))?\s*([a-zA-Z%×\u4e00-\u9fff]*)\.?\s*$/i.exec(t);
    if (!m) { return null; }
    var v = parseFloat(m[1]);
    if (m[2] !== undefined) { var d = parseFloat(m[2]); if (!d) { return null; } v = v / d; }
    return isFinite(v) ? {value: v, unit: m[3].toLowerCase()} : null;
  }
  var BYTE_UNITS = {"": 1, "b": 1, "byte": 1, "bytes": 1, "字节": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
                    "kib": 1024, "mib": 1048576, "gib": 1073741824};
  var RATIO_UNITS = {"": 1, "x": 1, "×": 1, "倍": 1, "times": 1, "%": 0.01};
  /* judge(kind, text, answer, places) -> "empty" | "unreadable" | "right" | "wrong" */
  function judge(kind, text, answer, places) {
    if (!String(text).trim()) { return "empty"; }
    if (kind === "stage") {
      var s = String(text).toLowerCase().replace(/[\s\-_–]/g, "");
      var id = (s === "dp" || s === "ddp" || s === "数据并行") ? "dp" :
        (/^(?:zero|z|stage)([123])$/.exec(s) || [])[1] ? "zero" + /([123])$/.exec(s)[1] : (s === "none" || s === "无") ? "none" : null;
      if (!id) { return "unreadable"; }
      return id === answer ? "right" : "wrong";
    }
    var a = parseAnswer(text);
    if (!a) { return "unreadable"; }
    if (kind === "bytes") {
      if (!(a.unit in BYTE_UNITS)) { return "unreadable"; }
      return Math.abs(a.value * BYTE_UNITS[a.unit] - answer) <= 1e-6 * Math.max(1, answer) ? "right" : "wrong";
    }
    if (kind === "gb") {
      var scale = a.unit === "" || a.unit === "gb" ? 1 : (a.unit in BYTE_UNITS ? BYTE_UNITS[a.unit] / 1e9 : null);
      if (scale === null) { return "unreadable"; }
      return Math.abs(a.value * scale - answer / 1e9) <= 0.5 * Math.pow(10, -places) + 1e-9 ? "right" : "wrong";
    }
    if (kind === "ratio") {
      if (!(a.unit in RATIO_UNITS)) { return "unreadable"; }
      var want = parseAnswer(answer);
      /* within 0.1 %: gloo's ZeRO-3 / DP at the anchor is 900324415/450162388, and "2" is the right reply */
      return Math.abs(a.value * RATIO_UNITS[a.unit] - want.value) <= 1e-3 * Math.abs(want.value) + 1e-12 ? "right" : "wrong";
    }
    return "unreadable";
  }
  window.ringemuJudge = judge; /* for the tests: the same reading the page uses */

  Page.prototype.i18n = function () {
    var self = this;
    this.root.querySelectorAll("[data-i18n]").forEach(function (e) { e.textContent = self.L(e.getAttribute("data-i18n")); });
    document.documentElement.lang = this.lang === "zh" ? "zh-CN" : "en";
    var lb = $(this.root, "lang");
    if (lb) { lb.textContent = this.lang === "zh" ? "English" : "中文"; lb.setAttribute("lang", this.lang === "zh" ? "en" : "zh-CN"); }
  };

  /* ---------------- memory bars and formula ---------------- */
  Page.prototype.preset = function () { return this.data.memory.presets[this.mem.preset]; };
  Page.prototype.point = function () { var p = this.preset(); return p.points[this.mem.n + "|" + this.mem.rc]; };

  Page.prototype.initMemory = function () {
    var self = this, m = this.data.memory, root = this.root;
    var pre = $(root, "presets");
    m.presets.forEach(function (p, i) {
      var b = el("button", {"type": "button", "data-preset": p.id}, self.T(p.label));
      b.addEventListener("click", function () { self.choosePreset(i); });
      pre.appendChild(b);
    });
    $(root, "next-stage").addEventListener("click", function () {
      self.mem.stage = (self.mem.stage + 1) % m.stages.length; self.renderMemory();
    });
    $(root, "n-select").addEventListener("change", function (e) { self.mem.n = e.target.value; self.renderMemory(); });
    $(root, "rc-select").addEventListener("change", function (e) { self.mem.rc = e.target.value; self.renderMemory(); });
    $(root, "view-select").addEventListener("change", function (e) { self.mem.view = e.target.value; self.renderMemory(); });
    this.mem.view = "states";
    this.choosePreset(0, true);
  };

  Page.prototype.choosePreset = function (i, first) {
    this.mem.preset = i; var p = this.preset();
    var start = (first && this.data.memory.start_n) ? this.data.memory.start_n : p.default_n;
    this.mem.n = String(start); this.mem.rc = p.default_recompute; this.mem.term = null;
    if (!first) { this.mem.stage = 0; }
    this.fillN();
    this.renderMemory();
  };

  Page.prototype.fillN = function () {
    var self = this, ns = $(this.root, "n-select"); ns.innerHTML = "";
    this.data.memory.ranks.forEach(function (n) { ns.appendChild(el("option", {"value": String(n)}, self.N(n))); });
    ns.value = this.mem.n;
  };

  Page.prototype.renderMemory = function () {
    var self = this, m = this.data.memory, p = this.preset(), pt = this.point(), root = this.root;
    var view = this.mem.view, vs = $(root, "view-select"); vs.innerHTML = "";
    ["states", "peak"].forEach(function (v) { vs.appendChild(el("option", {"value": v}, self.L("view_" + v))); });
    vs.value = view;
    root.querySelectorAll("[data-preset]").forEach(function (b, i) {
      b.setAttribute("aria-pressed", String(b.getAttribute("data-preset") === p.id)); b.textContent = self.T(m.presets[i].label);
    });
    var rs = $(root, "rc-select"); rs.innerHTML = "";
    p.recompute.forEach(function (id) { rs.appendChild(el("option", {"value": id}, self.L("rc_" + id))); });
    rs.value = this.mem.rc;
    $(root, "n-select").value = this.mem.n;
    $(root, "preset-note").textContent = this.T(p.note);
    /* legend */
    var lg = $(root, "legend"); lg.innerHTML = "";
    m.categories.forEach(function (c) {
      var s = el("span"); var sw = el("span", {"class": "swatch", "style": "background:" + c.color}); s.appendChild(sw);
      s.appendChild(document.createTextNode(self.T(c.label))); lg.appendChild(s);
    });
    /* bars */
    var svg = $(root, "mem-svg"), ns = svg.namespaceURI, ch = p.chart;
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    svg.setAttribute("width", ch.width); svg.setAttribute("height", ch.height);
    svg.setAttribute("viewBox", "0 0 " + ch.width + " " + ch.height);
    function s(tag, attrs, text) {
      var e = document.createElementNS(ns, tag);
      for (var k in attrs) { e.setAttribute(k, attrs[k]); }
      if (text !== undefined) { e.textContent = text; }
      svg.appendChild(e); return e;
    }
    ch.ticks.forEach(function (t) { s("text", {"x": 4, "y": t.y + 4}, t.gb + " GB"); s("line", {"x1": 64, "x2": ch.width, "y1": t.y, "y2": t.y, "stroke": "#ddd"}); });
    var statesOnly = {"weights16": 1, "grads16": 1, "master32": 1, "adam_m": 1, "adam_v": 1};
    pt.stages.forEach(function (st, i) {
      var g = document.createElementNS(ns, "g");
      g.setAttribute("class", "bar" + (i > self.mem.stage ? " hidden" : "")); g.setAttribute("data-stage", st.id);
      svg.appendChild(g);
      ["measured", "formula"].forEach(function (kind) {
        st.bars[kind].forEach(function (seg) {
          var r = document.createElementNS(ns, "rect");
          var cls = "seg" + ((view === "states" && !statesOnly[seg.cat]) ? " off" : "");
          if (self.mem.term) { cls += (self.termCats(st).indexOf(seg.cat) >= 0) ? " hl" : " dim"; }
          var cat = self.category(seg.cat);
          var at = {"class": cls, "x": seg.x, "y": seg.y, "width": seg.w, "height": seg.h, "fill": cat.color,
                    "data-cat": seg.cat, "data-kind": kind, "data-stage": st.id, "data-bytes": seg.bytes,
                    "data-highlighted": String(cls.indexOf(" hl") >= 0)};
          for (var k in at) { r.setAttribute(k, at[k]); }
          var tt = document.createElementNS(ns, "title");
          tt.textContent = self.T(cat.label) + ": " + seg.gb + " GB (" + seg.bytes_text + " B)";
          r.appendChild(tt); g.appendChild(r);
        });
      });
      var lab = document.createElementNS(ns, "text");
      lab.setAttribute("x", st.label_x); lab.setAttribute("y", ch.height - 20);
      lab.textContent = self.T(st.label); g.appendChild(lab);
      var lab2 = document.createElementNS(ns, "text");
      lab2.setAttribute("x", st.label_x); lab2.setAttribute("y", ch.height - 6);
      lab2.setAttribute("data-role", "peak-label"); lab2.setAttribute("data-stage", st.id);
      lab2.textContent = self.L("measured_formula");
      g.appendChild(lab2);
      var topY = ch.bottom;
      ["measured", "formula"].forEach(function (kind) {
        st.bars[kind].forEach(function (seg) { if (seg.h > 0 && !(view === "states" && !statesOnly[seg.cat])) { topY = Math.min(topY, seg.y); } });
      });
      var top = document.createElementNS(ns, "text");
      var shown = view === "states" ? [st.model_states_gb, st.model_states_bytes] : [st.peak_gb, st.peak_bytes];
      top.setAttribute("x", st.label_x); top.setAttribute("y", Math.max(14, topY - 6));
      top.setAttribute("data-role", "bar-label"); top.setAttribute("data-stage", st.id);
      top.setAttribute("data-view", view); top.setAttribute("data-bytes", shown[1]);
      top.textContent = shown[0] + " GB"; g.appendChild(top);
    });
    s("line", {"class": "card", "x1": 64, "x2": ch.width, "y1": ch.card_y, "y2": ch.card_y, "data-role": "card-line", "data-bytes": m.card_bytes});
    s("text", {"x": ch.width - 110, "y": ch.card_y - 5}, m.card_gb + " GB " + this.L("card"));
    /* table of the stages at this point */
    var tb = $(root, "mem-table"); tb.innerHTML = "";
    var hr = el("tr"); ["stage", "model_states", "states_fit", "activations", "buffers", "peak", "peak_fits"].forEach(function (k) { hr.appendChild(el("th", {}, self.L(k))); });
    tb.appendChild(hr);
    pt.stages.forEach(function (st, i) {
      var tr = el("tr", {"data-stage": st.id, "class": i > self.mem.stage ? "later" : ""});
      tr.appendChild(el("th", {}, self.T(st.label)));
      tr.appendChild(el("td", {"data-bytes": st.model_states_bytes}, st.model_states_gb + " GB"));
      tr.appendChild(el("td", {"class": st.model_states_fit ? "ok" : "no"}, self.L(st.model_states_fit ? "yes" : "no")));
      tr.appendChild(el("td", {"data-bytes": st.activation_bytes}, st.activation_gb + " GB"));
      tr.appendChild(el("td", {"data-bytes": st.buffer_bytes}, st.buffer_gb + " GB"));
      tr.appendChild(el("td", {"data-bytes": st.peak_bytes}, st.peak_gb + " GB"));
      tr.appendChild(el("td", {"class": st.peak_fits ? "ok" : "no"}, self.L(st.peak_fits ? "yes" : "no")));
      tb.appendChild(tr);
    });
    $(root, "stage-now").textContent = this.T(pt.stages[this.mem.stage].label);
    /* first fits */
    var ff = p.first_fits[this.mem.rc], fl = $(root, "first-fits"); fl.innerHTML = "";
    pt.stages.forEach(function (st) {
      var li = el("li", {"data-stage": st.id, "data-states-first-fit": ff.model_states[st.id] === null ? "" : ff.model_states[st.id],
                         "data-peak-first-fit": ff.peak[st.id] === null ? "" : ff.peak[st.id]});
      var a = ff.model_states[st.id], b = ff.peak[st.id];
      li.textContent = self.T(st.label) + ": " +
        (a === null ? self.L("states_never") : self.L("states_first_fit") + " N = " + self.N(a)) + (self.lang === "zh" ? "；" : "; ") +
        (b === null ? self.L("peak_never") : self.L("peak_first_fit") + " N = " + self.N(b));
      fl.appendChild(li);
    });
    this.renderHeadroom();
    this.renderTerms();
  };

  /* the lesson's third experiment: the card less ZeRO-3's states, against each setting's activations */
  Page.prototype.renderHeadroom = function () {
    var self = this, box = $(this.root, "headroom"), hr = this.preset().headroom[this.mem.n];
    box.innerHTML = "";
    if (!hr) { box.hidden = true; return; }
    box.hidden = false;
    box.appendChild(el("h3", {}, this.L("headroom_title")));
    box.appendChild(el("p", {"data-role": "headroom-line", "data-bytes": hr.bytes},
      this.F("headroom_line", {card: this.data.memory.card_gb, states: hr.zero3_states_gb, left: hr.gb, n: this.N(this.mem.n)})));
    var top = hr.bytes;
    hr.activations.forEach(function (a) { top = Math.max(top, a.bytes); });
    function bar(label, bytes, gb, colour, attrs, verdict) {
      var row = el("div", Object.assign({"class": "hbar"}, attrs));
      row.appendChild(el("span", {"class": "label"}, label));
      row.appendChild(el("span", {"class": "fill", "style": "width:" + Math.max(1, Math.round(170 * bytes / top)) + "px;background:" + colour}));
      row.appendChild(el("span", {}, gb + " GB" + (verdict === undefined ? "" : " · ") ));
      if (verdict !== undefined) { row.appendChild(el("span", {"class": verdict ? "ok" : "no"}, self.L(verdict ? "fits" : "does_not_fit"))); }
      box.appendChild(row);
    }
    bar(this.L("headroom_left"), hr.bytes, hr.gb, "#ffffff", {"data-role": "headroom-left", "data-bytes": hr.bytes});
    hr.activations.forEach(function (a) {
      bar(self.L("rc_" + a.recompute), a.bytes, a.gb, "#CC79A7", {"data-role": "headroom-act", "data-recompute": a.recompute, "data-bytes": a.bytes}, a.fits);
    });
  };

  Page.prototype.category = function (id) {
    var cs = this.data.memory.categories;
    for (var i = 0; i < cs.length; i++) { if (cs[i].id === id) { return cs[i]; } }
    return null;
  };

  Page.prototype.termCats = function (st) {
    var id = this.mem.term;
    for (var i = 0; i < st.terms.length; i++) { if (st.terms[i].id === id) { return st.terms[i].cats; } }
    return [];
  };

  Page.prototype.renderTerms = function () {
    var self = this, pt = this.point(), st = pt.stages[this.mem.stage], box = $(this.root, "terms");
    box.innerHTML = "";
    st.terms.forEach(function (t) {
      var b = el("button", {"type": "button", "data-term": t.id, "aria-pressed": String(self.mem.term === t.id)}, t.symbol + " · " + self.T(self.data.memory.term_labels[t.id]));
      b.addEventListener("click", function () { self.mem.term = (self.mem.term === t.id) ? null : t.id; self.renderMemory(); });
      box.appendChild(b);
    });
    var d = $(this.root, "term-detail"); d.innerHTML = "";
    var t = null;
    st.terms.forEach(function (x) { if (x.id === self.mem.term) { t = x; } });
    if (!t) { d.textContent = this.L("choose_term"); d.removeAttribute("data-term"); return; }
    d.setAttribute("data-term", t.id);
    var dl = el("dl");
    [["symbol", t.symbol], ["formula_value", t.formula_gb + " GB (" + t.formula_text + " B)"],
     ["measured", t.measured_gb + " GB (" + t.measured_text + " B)"], ["difference", t.diff_gb + " GB (" + t.diff_text + " B)"]].forEach(function (kv) {
      dl.appendChild(el("dt", {}, self.L(kv[0]))); dl.appendChild(el("dd", {"data-field": kv[0]}, kv[1]));
    });
    d.appendChild(dl);
    d.appendChild(el("p", {"class": "small"}, self.T(this.data.memory.term_note)));
  };

  /* ---------------- ring stepper ---------------- */
  Page.prototype.alg = function () { return this.data.stepper.algorithms[this.st.alg]; };

  Page.prototype.initStepper = function () {
    var self = this, root = this.root, sel = $(root, "alg-select");
    var algs = this.data.stepper.algorithms;
    Object.keys(algs).forEach(function (k) { sel.appendChild(el("option", {"value": k}, algs[k].label || k)); });
    sel.value = this.st.alg;
    sel.addEventListener("change", function (e) { self.st.alg = e.target.value; self.st.step = 0; self.renderStepper(); });
    $(root, "prev").addEventListener("click", function () { self.go(self.st.step - 1); });
    $(root, "next").addEventListener("click", function () { self.go(self.st.step + 1); });
    $(root, "slider").addEventListener("input", function (e) { self.go(parseInt(e.target.value, 10)); });
    this.st.speed = 1; this.st.timer = null;
    $(root, "play").addEventListener("click", function () { self.play(self.st.timer === null); });
    $(root, "speed").addEventListener("change", function (e) { self.st.speed = parseFloat(e.target.value) || 1; });
    var pb = $(root, "predict-check"), pin = $(root, "predict-input");
    function predict() {
      var a = self.alg(), out = $(root, "predict-out");
      var r = judge("bytes", pin.value, a.totals.rank_sent[0], 0);
      out.setAttribute("data-result", r);
      out.textContent = r === "empty" ? self.L("ex_empty") : r === "unreadable" ? self.F("ex_unreadable", {example: self.L("ex_example_bytes")}) :
        (r === "right" ? self.L("predict_right") : self.L("predict_wrong")) + " " + a.totals.rank_sent_text[0] + " B";
    }
    pb.addEventListener("click", predict);
    pin.addEventListener("keydown", function (e) { if (e.key === "Enter") { predict(); e.preventDefault(); } });
    document.addEventListener("keydown", function (e) {
      var t = e.target && e.target.tagName;
      if (t === "INPUT" || t === "SELECT" || t === "TEXTAREA") { return; }
      if (e.key === "ArrowRight") { self.go(self.st.step + 1); e.preventDefault(); }
      if (e.key === "ArrowLeft") { self.go(self.st.step - 1); e.preventDefault(); }
    });
    this.renderStepper();
  };

  Page.prototype.go = function (k) {
    var a = this.alg(), before = this.st.step; this.st.step = Math.max(0, Math.min(a.n_steps, k));
    this.renderStepper(this.st.step === before + 1);
  };

  /* play: one step every 1.2 s / speed until the end; pause stops it */
  Page.prototype.play = function (on) {
    var self = this, b = $(this.root, "play");
    if (this.st.timer !== null) { clearTimeout(this.st.timer); this.st.timer = null; }
    if (on && this.st.step >= this.alg().n_steps) { this.go(0); }
    function tick() {
      if (self.st.step >= self.alg().n_steps) { self.play(false); return; }
      self.go(self.st.step + 1);
      self.st.timer = setTimeout(tick, 1200 / self.st.speed);
    }
    if (on) { this.st.timer = setTimeout(tick, 50); }
    b.setAttribute("aria-pressed", String(!!on)); b.textContent = this.L(on ? "pause" : "play");
  };

  Page.prototype.phaseText = function (phase) {
    var m = /^(reduce to|broadcast from) rank (\d+)$/.exec(phase);
    if (m) { return this.F(m[1] === "reduce to" ? "phase_reduce_to" : "phase_broadcast_from", {r: m[2]}); }
    return this.L("phase_" + phase, phase);
  };

  /* each transfer of this step as its value travelling from sender to receiver (or placed on its link) */
  Page.prototype.packets = function (svg, a, k, animate) {
    var ns = svg.namespaceURI, prev = a.steps[k - 1], s = a.steps[k], dur = 900 / this.st.speed, moving = 0;
    s.transfers.forEach(function (t) {
      var g = document.createElementNS(ns, "g"), tx = document.createElementNS(ns, "text");
      g.setAttribute("class", "packet"); g.setAttribute("data-src", t.src); g.setAttribute("data-dst", t.dst);
      var value = prev.cells[t.src][t.chunk].value_text;
      tx.textContent = value === "" ? "c" + t.chunk : value; tx.setAttribute("x", 0); tx.setAttribute("y", 4);
      tx.setAttribute("text-anchor", "middle"); g.appendChild(tx); svg.appendChild(g);
      var end = "translate(" + t.lx + "px," + t.ly + "px)";
      if (animate && g.animate) {
        g.animate([{transform: "translate(" + t.ax1 + "px," + t.ay1 + "px)"}, {transform: "translate(" + t.ax2 + "px," + t.ay2 + "px)"}],
                  {duration: dur, easing: "ease-in-out", fill: "none"});
        moving++;
      }
      g.style.transform = end;
    });
    svg.setAttribute("data-animated", String(moving > 0));
  };

  Page.prototype.renderStepper = function (forward) {
    var self = this, root = this.root, a = this.alg(), k = this.st.step, s = a.steps[k];
    var pal = this.data.stepper.palette;
    $(root, "slider").max = String(a.n_steps); $(root, "slider").value = String(k);
    $(root, "step-text").textContent = this.L("step") + " " + k + " / " + a.n_steps;
    $(root, "step-text").setAttribute("data-step", k);
    var ph = $(root, "phase"); ph.textContent = this.phaseText(s.phase);
    ph.className = "phase " + (s.phase === "reduce-scatter" ? "rs" : s.phase === "all-gather" ? "ag" : "other");
    var summary = this.lang === "zh" ? (this.data.labels.alg_zh || {})[a.algorithm] || a.summary : a.summary;
    $(root, "alg-summary").textContent = summary ? (summary + " — " + a.source) : "";
    $(root, "input-note").textContent = this.F("input", {s: this.N(a.numel), dtype: a.dtype});
    $(root, "motion-note").textContent = reducedMotion() ? this.L("reduced_motion") : "";
    /* ring picture */
    var svg = $(root, "ring-svg"), ns = svg.namespaceURI;
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    function s2(tag, attrs, text) {
      var e = document.createElementNS(ns, tag);
      for (var q in attrs) { e.setAttribute(q, attrs[q]); }
      if (text !== undefined) { e.textContent = text; }
      svg.appendChild(e); return e;
    }
    var defs = s2("defs", {}), mk = document.createElementNS(ns, "marker");
    [["id", "arrowhead-" + a.key], ["markerWidth", "8"], ["markerHeight", "8"], ["refX", "7"], ["refY", "4"], ["orient", "auto"]].forEach(function (kv) { mk.setAttribute(kv[0], kv[1]); });
    var pth = document.createElementNS(ns, "path"); pth.setAttribute("d", "M0,0 L8,4 L0,8 z"); mk.appendChild(pth); defs.appendChild(mk);
    s.transfers.forEach(function (t) {
      s2("line", {"x1": t.ax1, "y1": t.ay1, "x2": t.ax2, "y2": t.ay2, "stroke": "#000", "stroke-width": 2,
                  "marker-end": "url(#arrowhead-" + a.key + ")", "data-src": t.src, "data-dst": t.dst, "data-chunk": t.chunk});
    });
    a.positions.forEach(function (p, r) {
      s2("circle", {"cx": p[0], "cy": p[1], "r": 14, "fill": "#fff", "stroke": "#000"});
      s2("text", {"x": p[0], "y": p[1] + 4, "text-anchor": "middle"}, "r" + r);
    });
    if (k > 0) { this.packets(svg, a, k, !!forward && !reducedMotion()); } else { svg.setAttribute("data-animated", "false"); }
    /* grid */
    var tb = $(root, "grid"); tb.innerHTML = "";
    var hr = el("tr"); hr.appendChild(el("th", {}, ""));
    for (var c = 0; c < a.n_chunks; c++) { hr.appendChild(el("th", {}, this.L("chunk") + " " + c)); }
    tb.appendChild(hr);
    s.cells.forEach(function (row, r) {
      var tr = el("tr"); tr.appendChild(el("th", {}, self.L("rank") + " " + r));
      row.forEach(function (cell, c) {
        var td = el("td", {"data-rank": r, "data-chunk": c, "data-step": k, "data-value": cell.value_text,
                           "data-prov": cell.prov_text, "class": cell.received ? "recv" : "",
                           "style": "background:" + pal[cell.count].bg + ";color:" + pal[cell.count].fg});
        td.appendChild(el("span", {"class": "v"}, cell.value_text === "" ? "·" : cell.value_text));
        td.appendChild(el("span", {"class": "p"}, cell.prov_text));
        tr.appendChild(td);
      });
      tb.appendChild(tr);
    });
    /* counters */
    var ct = $(root, "rank-counters"); ct.innerHTML = "";
    var h2 = el("tr"); ["rank", "sent", "received"].forEach(function (x) { h2.appendChild(el("th", {}, self.L(x))); }); ct.appendChild(h2);
    for (var r = 0; r < a.n_ranks; r++) {
      var tr = el("tr");
      tr.appendChild(el("th", {}, "r" + r));
      tr.appendChild(el("td", {"data-counter": "sent", "data-rank": r, "data-bytes": s.rank_sent[r]}, s.rank_sent_text[r] + " B"));
      tr.appendChild(el("td", {"data-counter": "recv", "data-rank": r, "data-bytes": s.rank_recv[r]}, s.rank_recv_text[r] + " B"));
      ct.appendChild(tr);
    }
    var lt = $(root, "link-counters"); lt.innerHTML = "";
    var h3 = el("tr"); ["link", "bytes"].forEach(function (x) { h3.appendChild(el("th", {}, self.L(x))); }); lt.appendChild(h3);
    a.links.forEach(function (lk, i) {
      var tr = el("tr");
      tr.appendChild(el("th", {}, "r" + lk[0] + " → r" + lk[1]));
      tr.appendChild(el("td", {"data-link": lk[0] + ">" + lk[1], "data-bytes": s.links[i]}, s.links_text[i] + " B"));
      lt.appendChild(tr);
    });
    $(root, "ledger-total").textContent = this.L("ledger_total") + " " + a.totals.total_text + " B";
    /* final row against numpy */
    var fin = $(root, "final");
    if (k === a.n_steps && a.numpy_sum_text) {
      fin.textContent = this.L("numpy_sum") + " [" + a.numpy_sum_text + "] — " +
        (a.final_rows_equal_numpy ? this.L(a.all_equal ? "final_equal" : "final_differs") : "");
    } else { fin.textContent = this.L("final_wait"); }
  };

  /* ---------------- ZeRO communication strip ---------------- */
  Page.prototype.renderStrip = function () {
    var self = this, c = this.data.comm, box = $(this.root, "strip");
    if (!c || !box) { return; }
    box.innerHTML = "";
    $(this.root, "strip-note").textContent = this.T(c.note);
    c.stages.forEach(function (st) {
      var row = el("div", {"class": "strip", "data-stage": st.id, "data-ratio": st.ratio_to_dp});
      row.appendChild(el("strong", {"style": "min-width:70px"}, self.T(st.label)));
      st.phases.forEach(function (ph) {
        row.appendChild(el("span", {"class": "op " + ph.kind, "data-label": ph.label, "data-bytes": ph.bytes}, ph.label + ": " + ph.gb + " GB"));
        if (ph.then_update) { row.appendChild(el("span", {"class": "op upd"}, self.L("update_shard"))); }
      });
      row.appendChild(el("span", {}, "= " + st.total_gb + " GB · " + self.L("ratio_to_dp") + " " + st.ratio_to_dp));
      box.appendChild(row);
    });
  };

  /* ---------------- the algorithm trade-off (compare --sweep) ---------------- */
  var TRADE_STYLE = [["#0072B2", ""], ["#E69F00", "6 3"], ["#009E73", "2 3"], ["#CC79A7", "8 3 2 3"], ["#56B4E9", "1 2"],
                     ["#D55E00", "10 4"], ["#000000", "4 2 1 2"], ["#7F7F7F", "3 3"], ["#8C510A", "12 3 3 3"]];
  Page.prototype.renderTradeoff = function () {
    var self = this, d = this.data.tradeoff, svg = $(this.root, "trade-svg");
    if (!d || !svg) { return; }
    var ch = d.chart, ns = svg.namespaceURI;
    $(this.root, "trade-note").textContent = this.F("tradeoff_note", {n: d.n_ranks, nodes: d.n_nodes, dtype: d.dtype});
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    svg.setAttribute("width", ch.width); svg.setAttribute("height", ch.height);
    svg.setAttribute("viewBox", "0 0 " + ch.width + " " + ch.height);
    function s(tag, attrs, text, parent) {
      var e = document.createElementNS(ns, tag);
      for (var k in attrs) { e.setAttribute(k, attrs[k]); }
      if (text !== undefined) { e.textContent = text; }
      (parent || svg).appendChild(e); return e;
    }
    ch.y_ticks.forEach(function (t) { s("line", {"x1": ch.left, "x2": ch.right, "y1": t.y, "y2": t.y, "stroke": "#ddd"}); s("text", {"x": 2, "y": t.y + 4}, t.text); });
    ch.x_ticks.forEach(function (t, i) { s("line", {"x1": t.x, "x2": t.x, "y1": ch.top, "y2": ch.bottom, "stroke": "#eee"});
      if (i % 2 === 0) { s("text", {"x": t.x, "y": ch.bottom + 16, "text-anchor": "middle"}, t.text); } });
    s("text", {"x": (ch.left + ch.right) / 2, "y": ch.height - 8, "text-anchor": "middle"}, this.L("elements_per_rank"));
    d.crossovers.forEach(function (c) { s("line", {"x1": c.x, "x2": c.x, "y1": ch.top, "y2": ch.bottom, "stroke": "#000", "stroke-dasharray": "3 3", "data-role": "crossover", "data-numel": c.numel}); });
    var detail = $(this.root, "trade-detail");
    d.series.forEach(function (ser, i) {
      var st = TRADE_STYLE[i % TRADE_STYLE.length];
      s("polyline", {"class": "trade-line", "points": ser.points.map(function (p) { return p.x + "," + p.y; }).join(" "),
                     "stroke": st[0], "stroke-dasharray": st[1], "data-alg": ser.name});
      ser.points.forEach(function (p) {
        var c = s("circle", {"class": "pt" + (p.fastest ? " fastest" : ""), "cx": p.x, "cy": p.y, "r": p.fastest ? 4 : 2.5,
                             "fill": st[0], "tabindex": p.fastest ? "0" : "-1", "data-alg": ser.name, "data-numel": p.numel, "data-bytes": p.bytes});
        var text = ser.name + ": " + self.N(p.numel) + " · " + p.time_text + " · " + p.bytes_text + " B";
        s("title", {}, text, c);
        function show() { detail.textContent = text + (p.fastest ? " (" + self.L("fastest_at") + ")" : ""); }
        c.addEventListener("mouseenter", show); c.addEventListener("focus", show);
      });
    });
    var ul = $(this.root, "crossovers"); ul.innerHTML = "";
    d.series.forEach(function (ser, i) {
      var st = TRADE_STYLE[i % TRADE_STYLE.length], li = el("li", {"data-alg": ser.name});
      var sv = document.createElementNS(ns, "svg"); sv.setAttribute("width", "34"); sv.setAttribute("height", "10");
      var ln = document.createElementNS(ns, "line");
      [["x1", 1], ["x2", 33], ["y1", 5], ["y2", 5], ["stroke", st[0]], ["stroke-width", 2], ["stroke-dasharray", st[1]]].forEach(function (kv) { ln.setAttribute(kv[0], kv[1]); });
      sv.appendChild(ln); li.appendChild(sv); li.appendChild(document.createTextNode(" " + ser.name + " (" + ser.steps + " " + self.L("steps_word") + ")"));
      ul.appendChild(li);
    });
    d.crossovers.forEach(function (c) {
      ul.appendChild(el("li", {"data-role": "crossover-text", "data-numel": c.numel}, self.F("crossover", {numel: self.N(c.numel + 1), after: c.after, before: c.before})));
    });
  };

  /* ---------------- exercises ---------------- */
  Page.prototype.renderExercises = function () {
    var self = this, list = $(this.root, "exercises"), qs = this.data.exercises;
    if (!list || !qs) { return; }
    list.innerHTML = "";
    qs.forEach(function (q) {
      var li = el("li", {"data-exercise": q.id});
      var params = {};
      for (var k in q.params) { params[k] = typeof q.params[k] === "number" ? self.N(q.params[k]) : q.params[k]; }
      li.appendChild(el("p", {}, self.F("q_" + q.id, params)));
      var row = el("div", {"class": "row"});
      var input = el("input", {"data-role": "answer", "aria-label": self.F("q_" + q.id, params)});
      var check = el("button", {"type": "button", "data-role": "check"}, self.L("check"));
      var hint = el("button", {"type": "button", "data-role": "hint", "aria-expanded": "false"}, self.L("hint"));
      var out = el("span", {"data-role": "result", "aria-live": "polite"});
      var hintText = el("p", {"class": "small", "data-role": "hint-text", "hidden": ""}, self.F("h_" + q.id, params));
      var reveal = el("button", {"type": "button", "data-role": "reveal", "hidden": ""}, self.L("show_answer"));
      var why = q.why ? self.F("w_" + q.id, q.why) : "";
      function answerText() { return q.kind === "stage" ? (q.answer === "none" ? self.L("none") : self.T(self.stageLabel(q.answer))) : q.answer_text; }
      function doCheck() {
        var r = judge(q.kind, input.value, q.answer, q.places || 0);
        out.setAttribute("data-result", r);
        if (r === "empty") { out.textContent = self.L("ex_empty"); return; }
        if (r === "unreadable") { out.textContent = self.F("ex_unreadable", {example: self.L("ex_example_" + q.kind)}); return; }
        if (r === "right") { out.textContent = self.L("ex_right") + " " + answerText() + (why ? " " + why : ""); reveal.hidden = true; return; }
        out.textContent = self.L("ex_wrong"); reveal.hidden = false;
      }
      check.addEventListener("click", doCheck);
      input.addEventListener("keydown", function (e) { if (e.key === "Enter") { doCheck(); e.preventDefault(); } });
      hint.addEventListener("click", function () { hintText.hidden = !hintText.hidden; hint.setAttribute("aria-expanded", String(!hintText.hidden)); });
      reveal.addEventListener("click", function () { out.setAttribute("data-result", "revealed"); out.textContent = self.L("answer_is") + " " + answerText() + (why ? " " + why : ""); });
      [input, check, hint, reveal, out].forEach(function (e) { row.appendChild(e); });
      li.appendChild(row); li.appendChild(hintText); list.appendChild(li);
    });
  };

  Page.prototype.stageLabel = function (id) {
    var m = this.data.memory, st = m ? m.presets[0].points[Object.keys(m.presets[0].points)[0]].stages : [];
    for (var i = 0; i < st.length; i++) { if (st[i].id === id) { return st[i].label; } }
    return id;
  };

  Page.prototype.renderAll = function () {
    this.i18n();
    if (this.mem) { this.fillN(); this.renderMemory(); }
    if (this.st) { this.renderStepper(); $(this.root, "play").textContent = this.L(this.st.timer === null ? "play" : "pause"); }
    this.renderStrip(); this.renderTradeoff(); this.renderExercises();
  };

  Page.prototype.start = function () {
    var self = this, lb = $(this.root, "lang");
    if (lb) { lb.addEventListener("click", function () { self.lang = self.lang === "zh" ? "en" : "zh"; self.renderAll(); }); }
    this.i18n();
    if (this.mem) { this.initMemory(); }
    if (this.st) { this.initStepper(); }
    this.renderStrip(); this.renderTradeoff(); this.renderExercises();
  };

  document.querySelectorAll("[data-ringemu-page]").forEach(function (root) {
    if (root.ringemuPage) { return; } /* a notebook runs this script once per output cell: start each page once */
    var data = JSON.parse(document.getElementById(root.getAttribute("data-ringemu-page")).textContent);
    var page = new Page(root, data); page.start(); root.ringemuPage = page;
  });
})();
