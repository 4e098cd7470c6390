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

  Page.prototype.i18n = function () {
    var self = this;
    this.root.querySelectorAll("[data-i18n]").forEach(function (e) { e.textContent = self.L(e.getAttribute("data-i18n")); });
    document.documentElement.lang = this.lang === "zh" ? "zh-CN" : "en";
    var lb = $(this.root, "lang");
    if (lb) { lb.textContent = this.lang === "zh" ? "English" : "中文"; }
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
    this.choosePreset(0, true);
  };

  Page.prototype.choosePreset = function (i, first) {
    this.mem.preset = i; var p = this.preset();
    this.mem.n = String(p.default_n); this.mem.rc = p.default_recompute; this.mem.term = null;
    if (!first) { this.mem.stage = 0; }
    var ns = $(this.root, "n-select"); ns.innerHTML = "";
    this.data.memory.ranks.forEach(function (n) { ns.appendChild(el("option", {"value": String(n)}, n.toLocaleString("en-US"))); });
    ns.value = this.mem.n;
    this.renderMemory();
  };

  Page.prototype.renderMemory = function () {
    var self = this, m = this.data.memory, p = this.preset(), pt = this.point(), root = this.root;
    root.querySelectorAll("[data-preset]").forEach(function (b) { b.setAttribute("aria-pressed", String(b.getAttribute("data-preset") === p.id)); });
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
    function s(tag, attrs, text) {
      var e = document.createElementNS(ns, tag);
      for (var k in attrs) { e.setAttribute(k, attrs[k]); }
      if (text !== undefined) { e.textContent = text; }
      svg.appendChild(e); return e;
    }
    ch.ticks.forEach(function (t) { s("text", {"x": 4, "y": t.y + 4}, t.text); s("line", {"x1": 56, "x2": ch.width, "y1": t.y, "y2": t.y, "stroke": "#ddd"}); });
    pt.stages.forEach(function (st, i) {
      var g = document.createElementNS(ns, "g");
      g.setAttribute("class", "bar" + (i > self.mem.stage ? " hidden" : "")); g.setAttribute("data-stage", st.id);
      svg.appendChild(g);
      ["measured", "formula"].forEach(function (kind) {
        st.bars[kind].forEach(function (seg) {
          var r = document.createElementNS(ns, "rect");
          var cls = "seg";
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
      var top = document.createElementNS(ns, "text");
      top.setAttribute("x", st.label_x); top.setAttribute("y", Math.max(12, st.top_y - 4));
      top.textContent = st.peak_gb + " GB"; g.appendChild(top);
    });
    s("line", {"class": "card", "x1": 56, "x2": ch.width, "y1": ch.card_y, "y2": ch.card_y, "data-role": "card-line", "data-bytes": m.card_bytes});
    s("text", {"x": ch.width - 96, "y": ch.card_y - 5}, m.card_gb + " GB " + this.L("card"));
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
        (a === null ? self.L("states_never") : self.L("states_first_fit") + " N = " + a.toLocaleString("en-US")) + "; " +
        (b === null ? self.L("peak_never") : self.L("peak_first_fit") + " N = " + b.toLocaleString("en-US"));
      fl.appendChild(li);
    });
    this.renderTerms();
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
    Object.keys(this.data.stepper.algorithms).forEach(function (k) { sel.appendChild(el("option", {"value": k}, k)); });
    sel.value = this.st.alg;
    sel.addEventListener("change", function (e) { self.st.alg = e.target.value; self.st.step = 0; self.renderStepper(); });
    $(root, "prev").addEventListener("click", function () { self.go(self.st.step - 1); });
    $(root, "next").addEventListener("click", function () { self.go(self.st.step + 1); });
    $(root, "slider").addEventListener("input", function (e) { self.go(parseInt(e.target.value, 10)); });
    var pb = $(root, "predict-check");
    if (pb) {
      pb.addEventListener("click", function () {
        var a = self.alg(), want = String(a.totals.rank_sent[0]), got = $(root, "predict-input").value.replace(/[ ,_]/g, "");
        var out = $(root, "predict-out");
        out.textContent = (got === want ? self.L("predict_right") : self.L("predict_wrong")) + " " + a.totals.rank_sent_text[0] + " B";
      });
    }
    document.addEventListener("keydown", function (e) {
      var t = e.target && e.target.tagName;
      if (t === "INPUT" || t === "SELECT" || t === "TEXTAREA") { return; }
      if (e.key === "ArrowRight") { self.go(self.st.step + 1); e.preventDefault(); }
      if (e.key === "ArrowLeft") { self.go(self.st.step - 1); e.preventDefault(); }
    });
    this.renderStepper();
  };

  Page.prototype.go = function (k) {
    var a = this.alg(); this.st.step = Math.max(0, Math.min(a.n_steps, k)); this.renderStepper();
  };

  Page.prototype.renderStepper = function () {
    var self = this, root = this.root, a = this.alg(), k = this.st.step, s = a.steps[k];
    var pal = this.data.stepper.palette;
    $(root, "slider").max = String(a.n_steps); $(root, "slider").value = String(k);
    $(root, "step-text").textContent = this.L("step") + " " + k + " / " + a.n_steps;
    $(root, "step-text").setAttribute("data-step", k);
    var ph = $(root, "phase"); ph.textContent = this.L("phase_" + s.phase, s.phase);
    ph.className = "phase " + (s.phase === "reduce-scatter" ? "rs" : s.phase === "all-gather" ? "ag" : "other");
    $(root, "alg-summary").textContent = a.summary ? (a.summary + " — " + a.source) : "";
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
      s2("text", {"x": t.lx, "y": t.ly}, "c" + t.chunk);
    });
    a.positions.forEach(function (p, r) {
      s2("circle", {"cx": p[0], "cy": p[1], "r": 14, "fill": "#fff", "stroke": "#000"});
      s2("text", {"x": p[0] - 7, "y": p[1] + 4}, "r" + r);
    });
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

  Page.prototype.renderAll = function () {
    this.i18n();
    if (this.mem) { this.renderMemory(); }
    if (this.st) { this.renderStepper(); }
    this.renderStrip();
  };

  Page.prototype.start = function () {
    var self = this, lb = $(this.root, "lang");
    if (lb) { lb.addEventListener("click", function () { self.lang = self.lang === "zh" ? "en" : "zh"; self.renderAll(); }); }
    this.i18n();
    if (this.mem) { this.initMemory(); }
    if (this.st) { this.initStepper(); }
    this.renderStrip();
  };

  document.querySelectorAll("[data-ringemu-page]").forEach(function (root) {
    if (root.ringemuPage) { return; } /* a notebook runs this script once per output cell: start each page once */
    var data = JSON.parse(document.getElementById(root.getAttribute("data-ringemu-page")).textContent);
    var page = new Page(root, data); page.start(); root.ringemuPage = page;
  });
})();
