// storprof report.html: draws the page from the JSON data element.
// Hand-written, no libraries, no network. Frames and every other string
// of the data go into the page as text (textContent), never as markup.
(function () {
  'use strict';
  var errors = [];
  window.onerror = function (message, source, line, column) {
    errors.push(String(message) + ' at ' + line + ':' + column);
  };
  var consoleError = console.error;
  console.error = function () {
    errors.push(Array.prototype.join.call(arguments, ' '));
    consoleError.apply(console, arguments);
  };

  var D = JSON.parse(document.getElementById('storprof-data').textContent);
  var app = document.getElementById('app');
  var SVGNS = 'http://www.w3.org/2000/svg';
  var COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b',
    '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];

  // --- helpers ---------------------------------------------------------------
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (k === 'text') { e.textContent = attrs[k]; } else if (k === 'cls') { e.className = attrs[k]; } else { e.setAttribute(k, attrs[k]); }
      });
    }
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) { return; }
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    return e;
  }
  function pct(x, digits) { return (x * 100).toFixed(digits === undefined ? 1 : digits) + '%'; }
  function fixed(x, digits) { return x === null || x === undefined ? 'n/a' : Number(x).toFixed(digits); }
  function section(id, title) {
    var s = el('section', { id: id }, [el('h2', { text: title })]);
    app.appendChild(s);
    return s;
  }
  // A table from a header and rows of cells; a cell is text, or
  // {text, num: true} for a right-aligned figure, or {code: text}.
  function table(header, rows) {
    var t = el('table');
    t.appendChild(el('tr', null, header.map(function (h) { return el('th', { text: h }); })));
    rows.forEach(function (r) {
      t.appendChild(el('tr', null, r.map(function (c) {
        if (c !== null && typeof c === 'object') {
          if (c.code !== undefined) { return el('td', null, [el('code', { text: c.code })]); }
          return el('td', { cls: c.num ? 'num' : '', text: c.text });
        }
        return el('td', { text: c === null || c === undefined ? '' : String(c) });
      })));
    });
    return t;
  }
  function num(text) { return { text: text, num: true }; }
  function para(text, cls) { return el('p', { cls: cls || '', text: text }); }

  // --- verdict ---------------------------------------------------------------
  var v = D.verdict;
  document.title = D.title;
  app.appendChild(el('h1', null, ['storprof report ',
    el('span', { cls: 'badge', text: v.inconclusive ? 'inconclusive' : v.verdict })]));
  app.appendChild(el('nav', null, [
    ['#evidence', 'Evidence'], ['#wait', 'Who waits for whom'], ['#flamegraphs', 'Flamegraphs'],
    ['#timeline', 'Timeline'], ['#frames', 'Top frames'], ['#processes', 'Processes'],
    ['#devices', 'Devices'], ['#system', 'System']
  ].map(function (p) { return el('a', { href: p[0], text: p[1] }); })));
  app.appendChild(el('div', { cls: 'headline', text: v.headline }));
  app.appendChild(para((v.inconclusive ? 'Verdict inconclusive (the closest match is ' + v.verdict + ')'
    : 'Verdict ' + v.verdict) + ', confidence ' + v.confidence_label + ' (' + fixed(v.confidence, 2) + ').'));
  if (v.threshold_overrides && v.threshold_overrides.length) {
    app.appendChild(para('Thresholds overridden: ' + v.threshold_overrides.map(function (o) {
      return o.key + ' = ' + o.value + ' (default ' + o.default + ')';
    }).join(', ') + '.', 'muted'));
  }
  if (v.actions && v.actions.length) {
    app.appendChild(el('h3', { text: 'What to try' }));
    app.appendChild(el('ul', { cls: 'actions' }, v.actions.map(function (a) { return el('li', { text: a }); })));
  }
  if (D.early_verdict) { app.appendChild(el('div', { cls: 'note', text: D.early_verdict })); }
  if (D.partial) { app.appendChild(el('div', { cls: 'note warn', text: D.partial })); }

  var ev = section('evidence', 'Evidence');
  ev.appendChild(table(['figure', 'value'], v.evidence.map(function (e, i) {
    return [e.text, num(D.evidence_values[i])];
  })));
  if (v.stall) {
    ev.appendChild(el('h3', { text: 'Stalled (' + v.stall.kind + ')' }));
    ev.appendChild(para('No progress since ' + fixed(v.stall.since_s, 1) + ' s into the recording (for ' +
      fixed(v.stall.quiet_s, 1) + ' s). The threads it is stuck on, innermost frame last:'));
    (v.stall.threads || []).forEach(function (th) {
      ev.appendChild(el('h3', { text: th.comm + ' (pid ' + th.pid + ', tid ' + th.tid + '): ' + th.state + ', ' + fixed(th.seconds, 1) + ' s' }));
      ev.appendChild(el('pre', { cls: 'cmd', text: th.stack.length ? th.stack.join('\n') : '(no stack recorded)' }));
    });
  }
  if (v.notes.length) {
    ev.appendChild(el('h3', { text: 'Findings and caveats' }));
    ev.appendChild(el('ul', null, v.notes.map(function (n) { return el('li', { text: n }); })));
  }
  ev.appendChild(el('h3', { text: 'Runners-up' }));
  ev.appendChild(table(['verdict', 'conditions hold', 'score', 'finding'], v.runners_up.map(function (r) {
    return [{ code: r.verdict }, r.fired ? 'yes' : 'no', num(fixed(r.score, 2)), r.summary];
  })));

  // --- who waits for whom ------------------------------------------------------
  var ws = section('wait', 'Who waits for whom (roles and critical path)');
  var w = D.wait;
  if (!w) {
    ws.appendChild(para('No wake-up graph in this session (recorded before it existed, or the wake-up probe did not run).', 'muted'));
  } else {
    if (!w.consumers.length) {
      ws.appendChild(para('No consumer found: the readers are the whole pipeline.', 'muted'));
    } else {
      ws.appendChild(table(['consumer', 'waited for data', 'window (its time)', 'AU, kernel'], w.consumers.map(function (c) {
        return [c.comm + ' (pid ' + c.pid + ', tid ' + c.tid + ')' + (c.emulated_compute ? ', compute emulated by sleeps' : ''),
          num(fixed(c.data_wait_ns / 1e9, 2) + ' s'), num(fixed(c.window_ns / 1e9, 2) + ' s'), num(fixed(c.au_percentage, 1) + '%')];
      })));
      if (w.kernel_au_percentage !== null && D.bench_au_percentage !== null) {
        var k = w.kernel_au_percentage, b = D.bench_au_percentage, d = k - b;
        ws.appendChild(para('AU seen by the kernel ' + fixed(k, 1) + '%, reported by the workload\u2019s summary.json ' +
          fixed(b, 1) + '% (' + (d >= 0 ? '+' : '') + fixed(d, 1) + ' points).'));
      }
    }
    if (w.window) {
      ws.appendChild(para('Training window ' + fixed(w.window.start_s, 2) + '\u2013' + fixed(w.window.end_s, 2) + ' s, from ' + w.window.source + ' (shaded on the timeline).'));
    }
    if (w.phases.length) {
      ws.appendChild(table(['phase', 'from (s)', 'to (s)', 'what ran'], w.phases.map(function (p) {
        return [p.name, num(fixed(p.start_s, 2)), num(fixed(p.end_s, 2)), p.activity];
      })));
    }
    if (w.critical_path.length) {
      ws.appendChild(el('h3', { text: 'Where the consumer\u2019s data wait went (the critical path)' }));
      ws.appendChild(table(['state', 'share', 'threads'], w.critical_path.map(function (p) {
        return [p.kind, num(pct(p.share)), p.threads.slice(0, 4).map(function (t) {
          return t[2] + ' ' + t[0] + '/' + t[1] + ' ' + pct(t[3]);
        }).join(', ')];
      })));
    }
    if (w.roles.length) {
      ws.appendChild(el('h3', { text: 'Roles' }));
      var idle = w.roles.filter(function (r) { return r.role === 'idle'; });
      var rows = w.roles.filter(function (r) { return r.role !== 'idle'; }).map(function (r) {
        return [r.comm + ' ' + r.pid + '/' + r.tid, r.role, num(pct(r.on_cpu_share)), r.reason];
      });
      if (idle.length) {
        var most = idle.reduce(function (m, r) { return Math.max(m, r.on_cpu_share); }, 0);
        rows.push([idle.length + ' other thread(s)', 'idle', num('\u2264 ' + pct(most)),
          'neither wake the data path nor are waited on; they count toward no verdict']);
      }
      ws.appendChild(table(['thread', 'role', 'on CPU', 'why'], rows));
    }
  }

  // --- flamegraphs ---------------------------------------------------------------
  var names = D.flame.names;
  function hash(s) {
    var h = 0;
    for (var i = 0; i < s.length; i++) { h = (h * 31 + s.charCodeAt(i)) | 0; }
    return Math.abs(h);
  }
  function frameColor(kind, name, node, flame) {
    if (name.indexOf('[pruned ') === 0) { return '#c8c8c8'; }
    var h = hash(name);
    if (kind === 'diff') {
      var base = flame.base_share, share = node[1] > 0 ? node[3] / node[1] : base;
      var d = share - base, span = d > 0 ? 1 - base : base, t = span > 0 ? Math.min(1, Math.abs(d) / span) : 0;
      var light = Math.round(250 - 150 * t);
      return d > 0 ? 'rgb(250,' + light + ',' + light + ')' : 'rgb(' + light + ',' + light + ',250)';
    }
    if (kind === 'offcpu') { return 'hsl(' + (200 + h % 40) + ',55%,' + (62 + h % 18) + '%)'; }
    if (/_\[k\]$/.test(name)) { return 'hsl(' + (25 + h % 15) + ',85%,' + (60 + h % 15) + '%)'; }
    if (/\.py:\d+\)$/.test(name)) { return 'hsl(' + (90 + h % 40) + ',50%,' + (55 + h % 20) + '%)'; }
    return 'hsl(' + (h % 55) + ',80%,' + (58 + h % 20) + '%)';
  }

  var ROW = 17;
  function FlameView(host, kind, flame) {
    var self = this;
    this.kind = kind;
    this.flame = flame;
    this.path = [flame.root];
    this.term = '';
    this.matchShare = 0;
    this.controls = el('div', { cls: 'controls' });
    this.reset = el('button', { type: 'button', text: 'Reset zoom' });
    this.search = el('input', { type: 'search', placeholder: 'Search frames (substring)' });
    this.matchText = el('span', { cls: 'muted' });
    this.controls.appendChild(this.reset);
    this.controls.appendChild(this.search);
    this.controls.appendChild(this.matchText);
    this.crumbs = el('div', { cls: 'crumbs' });
    this.box = el('div', { cls: 'flame' });
    host.appendChild(this.controls);
    host.appendChild(this.crumbs);
    host.appendChild(this.box);
    this.reset.addEventListener('click', function () { self.path = [self.flame.root]; self.draw(); });
    this.search.addEventListener('input', function () { self.term = self.search.value.toLowerCase(); self.draw(); });
    this.box.addEventListener('click', function (event) {
      var f = event.target.closest ? event.target.closest('.frame') : null;
      if (f && f.__path) { self.path = f.__path; self.draw(); }
    });
  }
  FlameView.prototype.focus = function () { return this.path[this.path.length - 1]; };
  FlameView.prototype.draw = function () {
    var self = this, box = this.box, width = box.clientWidth || 1000;
    var unit = this.flame.unit, total = this.flame.total;
    while (box.firstChild) { box.removeChild(box.firstChild); }
    var focus = this.focus(), maxDepth = 0;
    var term = this.term, matched = 0, matchedFrames = 0;
    function frame(node, path, depth, x, w, ancestor) {
      var name = names[node[0]];
      var e = document.createElement('div');
      e.className = 'frame' + (ancestor ? ' ancestor' : '');
      var hit = term && name.toLowerCase().indexOf(term) >= 0;
      if (hit) { e.className += ' match'; }
      e.style.left = x + 'px';
      e.style.top = (depth * ROW) + 'px';
      e.style.width = Math.max(w - 1, 1) + 'px';
      e.style.background = frameColor(self.kind, name, node, self.flame);
      if (w > 28) { e.textContent = name; }
      var tip = name + '\n' + node[1] + ' ' + unit + ', ' + pct(node[1] / Math.max(total, 1), 2) + ' of all';
      if (self.kind === 'diff') { tip += '\nreader threads: ' + node[3] + ' ' + unit + ' (' + pct(node[3] / Math.max(node[1], 1)) + ' of this frame, ' + pct(self.flame.base_share) + ' of all samples)'; }
      e.title = tip;
      e.__path = path;
      e.__node = node;
      box.appendChild(e);
      if (depth > maxDepth) { maxDepth = depth; }
      return hit;
    }
    // Ancestors of the zoomed frame, full width and dimmed.
    for (var a = 0; a < this.path.length - 1; a++) {
      frame(this.path[a], this.path.slice(0, a + 1), a, 0, width, true);
    }
    function walk(node, path, depth, x, w, inMatch) {
      var hit = frame(node, path, depth, x, w, false);
      if (hit && !inMatch) { matched += node[1]; }
      if (hit) { matchedFrames++; }
      var cx = x;
      node[2].forEach(function (c) {
        var cw = w * c[1] / Math.max(node[1], 1);
        if (cw >= 0.5) { walk(c, path.concat([c]), depth + 1, cx, cw, inMatch || hit); } else if (term) { countHidden(c, inMatch || hit); }
        cx += cw;
      });
    }
    // Frames too narrow to draw still count toward the matched share.
    function countHidden(node, inMatch) {
      var hit = names[node[0]].toLowerCase().indexOf(term) >= 0;
      if (hit && !inMatch) { matched += node[1]; }
      if (hit) { matchedFrames++; }
      node[2].forEach(function (c) { countHidden(c, inMatch || hit); });
    }
    walk(focus, this.path, this.path.length - 1, 0, width, false);
    box.style.height = ((maxDepth + 1) * ROW + 2) + 'px';
    this.matchShare = focus[1] > 0 ? matched / focus[1] : 0;
    this.matchText.textContent = term ? (matchedFrames + ' frame(s) match: ' + pct(this.matchShare, 2) + ' of the ' + unit +
      (this.path.length > 1 ? ' of the zoomed frame' : '') + ' (' + pct(matched / Math.max(total, 1), 2) + ' of all)') : '';
    this.crumbs.textContent = this.path.length > 1 ? 'Zoomed: ' + this.path.map(function (n) { return names[n[0]]; }).join(' \u203a ') +
      ' (' + pct(focus[1] / Math.max(total, 1), 2) + ' of all); click a dimmed frame or Reset to zoom out' : 'Click a frame to zoom into it.';
  };

  var hs = section('whatif', 'What would help (projected)');
  var wh = D.what_would_help;
  if (!wh.today) {
    hs.appendChild(para(wh.none || 'No projection.', 'muted'));
  } else {
    var t0 = wh.today;
    hs.appendChild(para('A model fitted to this recording (docs/src/whatif.md), one lever at a time; storprof whatif projects others. Today a step takes ' +
      fixed(t0.step_s, 3) + ' s: compute ' + fixed(t0.compute_s, 3) + ' s, the consumer\u2019s own ' + fixed(t0.overhead_s, 3) +
      ' s, data wait ' + fixed(t0.wait_s, 3) + ' s; AU ' + fixed(t0.au_percentage, 1) + '%, ' + fixed(t0.steps_per_s, 2) + ' steps/s.'));
    hs.appendChild(table(['lever', 'AU', 'range', 'steps/s', 'why'], wh.projections.map(function (p) {
      var label = (p.lever === 'cache' || p.lever === 'lock') ? p.lever : p.lever + ' \u00d7' + p.factor;
      var has = p.projected_au_percentage !== null && p.projected_au_percentage !== undefined;
      return [label, num(has ? fixed(p.projected_au_percentage, 1) + '%' : '\u2014'),
        num(p.low !== null && p.low !== undefined ? fixed(p.low, 1) + '..' + fixed(p.high, 1) : '\u2014'),
        num(has ? fixed(p.projected_steps_per_s, 2) : '\u2014'), p.reason];
    })));
  }

  var fs = section('flamegraphs', 'Flamegraphs');
  var tabs = el('div', { cls: 'controls' });
  fs.appendChild(tabs);
  var flameHost = el('div');
  var flameNote = el('p', { cls: 'muted' });
  fs.appendChild(flameNote);
  fs.appendChild(flameHost);
  var views = {};
  var flameKinds = [
    ['oncpu', 'On-CPU (samples)', D.flame.oncpu],
    ['offcpu', 'Off-CPU (blocked time, \u00b5s)', D.flame.offcpu],
    ['diff', 'Differential: readers vs the rest', D.flame.diff]
  ];
  function pruneNote(f) {
    var s = f.total + ' ' + f.unit + ', ' + f.frames + ' frames.';
    if (f.pruned_frames > 0) {
      s += ' Pruned: ' + f.pruned_frames + ' frames below ' + pct(f.prune_share, 2) + ' of the total, holding ' +
        pct(f.pruned_share, 2) + ' of it, are merged into grey \u201c[pruned N frames, x%]\u201d frames.';
    }
    return s;
  }
  function showFlame(kind) {
    Object.keys(views).forEach(function (k) { views[k].host.hidden = k !== kind; });
    tabs.querySelectorAll('button').forEach(function (b) { b.className = b.getAttribute('data-kind') === kind ? 'on' : ''; });
    var f = views[kind].view.flame;
    var note = pruneNote(f);
    if (kind === 'diff') {
      note = 'Compares ' + D.flame.diff_label + ', frames merged across threads. Width: all samples; red: the readers hold more of the frame than their ' +
        pct(f.base_share) + ' of all samples, blue: less. ' + note;
    }
    flameNote.textContent = note;
    views[kind].view.draw();
  }
  flameKinds.forEach(function (k) {
    if (!k[2]) { return; }
    var b = el('button', { type: 'button', text: k[1], 'data-kind': k[0] });
    b.addEventListener('click', function () { showFlame(k[0]); });
    tabs.appendChild(b);
    var host = el('div', { id: 'flame-' + k[0] });
    flameHost.appendChild(host);
    views[k[0]] = { host: host, view: new FlameView(host, k[0], k[2]) };
  });
  if (!D.flame.diff) {
    tabs.appendChild(el('span', { cls: 'muted', text: 'No differential view: ' + D.flame.diff_absent + '.' }));
  }
  showFlame('oncpu');

  // --- timeline ------------------------------------------------------------------
  var T = D.timeline;
  var ts = section('timeline', 'Timeline');
  var tcontrols = el('div', { cls: 'controls' });
  var zin = el('button', { type: 'button', text: 'Zoom in', id: 'tl-zoom-in' });
  var zout = el('button', { type: 'button', text: 'Zoom out' });
  var zreset = el('button', { type: 'button', text: 'Reset' });
  var range = el('span', { cls: 'muted', id: 'tl-range' });
  [zin, zout, zreset, range].forEach(function (c) { tcontrols.appendChild(c); });
  ts.appendChild(tcontrols);
  var sampled = T.factor > 1 ? 'Downsampled: ' + T.buckets + ' buckets of ' + fixed(T.point_s / T.factor, 2) + ' s shown as ' + T.points +
    ' points of ' + fixed(T.point_s, 2) + ' s (' + T.factor + ' buckets each): lines are means, bands span each point\u2019s min and max; zooming does not add detail. ' :
    T.buckets + ' buckets of ' + fixed(T.point_s, 2) + ' s, every one shown. ';
  ts.appendChild(para(sampled + 'Drag across a panel to zoom into that span.' +
    (T.window ? ' Shaded: the training window (' + T.window_source + ').' : '') +
    (T.omitted_series ? ' CPU: the ' + T.omitted_series + ' less busy threads are summed into one line.' : ''), 'muted'));
  var tbox = el('div', { cls: 'timeline' });
  ts.appendChild(tbox);
  var full = [0, Math.max(T.points * T.point_s, T.point_s || 1)];
  var view = [full[0], full[1]];
  function niceMax(m) {
    if (!(m > 0) || !isFinite(m)) { return 1; }
    var base = Math.pow(10, Math.floor(Math.log10(m)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (steps[i] * base >= m) { return steps[i] * base; } }
    return 10 * base;
  }
  function drawTimeline() {
    while (tbox.firstChild) { tbox.removeChild(tbox.firstChild); }
    var W = tbox.clientWidth || 1000, H = 150, L = 60, R = 12, TOP = 18, B = 22;
    var pw = W - L - R, ph = H - TOP - B;
    var t0 = view[0], t1 = view[1], span = Math.max(t1 - t0, 1e-9);
    function xOf(t) { return L + (t - t0) / span * pw; }
    var i0 = Math.max(0, Math.floor(t0 / T.point_s) - 1), i1 = Math.min(T.points, Math.ceil(t1 / T.point_s) + 1);
    range.textContent = 'showing ' + fixed(t0, 1) + '\u2013' + fixed(t1, 1) + ' s of ' + fixed(full[1], 1) + ' s';
    T.panels.forEach(function (panel) {
      var s = svg('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H });
      var top = 0;
      panel.series.forEach(function (se) {
        var arr = se.max && se.max.length ? se.max : se.mean;
        for (var i = i0; i < i1; i++) { if (arr[i] > top) { top = arr[i]; } }
      });
      top = niceMax(top);
      function yOf(val) { return TOP + ph - val / top * ph; }
      var title = svg('text', { x: L, y: 13, 'font-size': 12, 'font-weight': 600 });
      title.textContent = panel.title + ' (' + panel.unit + ')';
      s.appendChild(title);
      if (T.window) {
        var wx0 = Math.max(xOf(T.window[0]), L), wx1 = Math.min(xOf(T.window[1]), L + pw);
        if (wx1 > wx0) { s.appendChild(svg('rect', { x: wx0, y: TOP, width: wx1 - wx0, height: ph, fill: '#2ca02c', 'fill-opacity': 0.09, 'class': 'window' })); }
      }
      for (var g = 0; g <= 4; g++) {
        var gy = TOP + ph * g / 4;
        s.appendChild(svg('line', { x1: L, x2: L + pw, y1: gy, y2: gy, stroke: '#e4e7eb' }));
        var lab = svg('text', { x: L - 6, y: gy + 4, 'font-size': 10, 'text-anchor': 'end', fill: '#5b6570' });
        lab.textContent = String(+(top * (4 - g) / 4).toPrecision(3));
        s.appendChild(lab);
      }
      for (var k = 0; k <= 6; k++) {
        var tt = t0 + span * k / 6, tx = xOf(tt);
        var xl = svg('text', { x: tx, y: H - 6, 'font-size': 10, 'text-anchor': k === 0 ? 'start' : (k === 6 ? 'end' : 'middle'), fill: '#5b6570' });
        xl.textContent = fixed(tt, span < 10 ? 1 : 0) + ' s';
        s.appendChild(xl);
      }
      panel.series.forEach(function (se, n) {
        var color = COLORS[n % COLORS.length], pts = [], band = [], back = [];
        for (var i = i0; i < i1; i++) {
          var x = xOf((i + 0.5) * T.point_s).toFixed(1);
          pts.push(x + ',' + yOf(se.mean[i]).toFixed(1));
          if (se.max && se.max.length) { band.push(x + ',' + yOf(se.max[i]).toFixed(1)); back.push(x + ',' + yOf(se.min[i]).toFixed(1)); }
        }
        if (band.length) { s.appendChild(svg('polygon', { points: band.concat(back.reverse()).join(' '), fill: color, 'fill-opacity': 0.15, stroke: 'none' })); }
        if (pts.length) { s.appendChild(svg('polyline', { points: pts.join(' '), fill: 'none', stroke: color, 'stroke-width': 1.3 })); }
      });
      var clip = svg('rect', { x: 0, y: 0, width: L, height: H, fill: '#fff', 'fill-opacity': 0 });
      s.appendChild(clip);
      var sel = svg('rect', { x: 0, y: TOP, width: 0, height: ph, fill: '#0b62c4', 'fill-opacity': 0.15 });
      s.appendChild(sel);
      var startX = null;
      function localX(event) { var r = s.getBoundingClientRect(); return Math.min(Math.max(event.clientX - r.left, L), L + pw); }
      s.addEventListener('mousedown', function (event) { startX = localX(event); sel.setAttribute('x', startX); sel.setAttribute('width', 0); event.preventDefault(); });
      s.addEventListener('mousemove', function (event) {
        if (startX === null) { return; }
        var x = localX(event);
        sel.setAttribute('x', Math.min(x, startX));
        sel.setAttribute('width', Math.abs(x - startX));
      });
      s.addEventListener('mouseup', function (event) {
        if (startX === null) { return; }
        var x = localX(event), a = Math.min(x, startX), b = Math.max(x, startX);
        startX = null;
        if (b - a > 4) { setView(t0 + (a - L) / pw * span, t0 + (b - L) / pw * span); } else { sel.setAttribute('width', 0); }
      });
      tbox.appendChild(s);
      tbox.appendChild(el('div', { cls: 'legend' }, panel.series.map(function (se, n) {
        var sw = el('i');
        sw.style.background = COLORS[n % COLORS.length];
        return el('span', null, [sw, se.label]);
      })));
      if (!panel.series.length) { tbox.appendChild(para('No series recorded.', 'muted')); }
    });
  }
  function setView(a, b) {
    var minSpan = Math.min(T.point_s * 4, full[1]);
    if (b - a < minSpan) { var c = (a + b) / 2; a = c - minSpan / 2; b = c + minSpan / 2; }
    if (a < full[0]) { b += full[0] - a; a = full[0]; }
    if (b > full[1]) { a -= b - full[1]; b = full[1]; }
    view = [Math.max(a, full[0]), b];
    drawTimeline();
  }
  zin.addEventListener('click', function () { var c = (view[0] + view[1]) / 2, h = (view[1] - view[0]) / 4; setView(c - h, c + h); });
  zout.addEventListener('click', function () { var c = (view[0] + view[1]) / 2, h = view[1] - view[0]; setView(c - h, c + h); });
  zreset.addEventListener('click', function () { setView(full[0], full[1]); });
  drawTimeline();

  // --- top frames, processes, devices, system ---------------------------------------
  var fr = section('frames', 'Top frames');
  function hotTables(title, hot, unit) {
    fr.appendChild(el('h3', { text: title }));
    if (!hot.total) { fr.appendChild(para('No stacks recorded.', 'muted')); return; }
    if (hot.path_weighted) {
      fr.appendChild(para('Weighted by the critical path: each reader thread\u2019s samples are scaled to its share of the consumer\u2019s data wait (' +
        hot.total + ' = the whole path); shares are of that weight. The flamegraphs and exports count raw samples.'));
    } else {
      fr.appendChild(para('Total: ' + hot.total + ' ' + unit + '.'));
    }
    [['By category', hot.categories], ['Hottest functions (self)', hot.self_functions], ['Hottest libraries (self)', hot.libraries]].forEach(function (p) {
      fr.appendChild(el('div', { cls: 'muted', text: p[0] }));
      fr.appendChild(table(['share', unit, 'frame'], p[1].map(function (r) { return [num(pct(r.share)), num(String(r.count)), { code: r.name }]; })));
    });
    if (hot.unnamed_total) {
      fr.appendChild(para('Frames without a name: ' + hot.unnamed_total + ' ' + unit + ' (' + pct(hot.unnamed_total / hot.total) + ') end in one: ' +
        hot.unnamed.map(function (r) { return r.name + ' ' + pct(r.share); }).join(', ') + '.'));
    } else {
      fr.appendChild(para('Every stack ends in a named frame.'));
    }
  }
  hotTables('On-CPU (reader threads)', D.hot_oncpu_readers, D.hot_oncpu_readers.path_weighted ? 'weight' : 'samples');
  hotTables('Off-CPU (all threads, blocked time)', D.hot_offcpu, 'us');

  var ps = section('processes', 'Processes');
  if (!D.processes.rows.length) {
    ps.appendChild(para('No thread statistics (threads.json missing or empty).', 'muted'));
  } else {
    ps.appendChild(table(['pid', 'comm', 'threads', 'CPU (% of one CPU)', 'runnable', 'sleeping', 'D (I/O)', 'read syscalls (MiB)', 'read MiB/s', 'page-cache misses (MiB)'],
      D.processes.rows.map(function (p) {
        return [num(String(p.pid)), { code: p.comm }, num(String(p.threads)), num(fixed(p.cpu_percent, 1) + '%'), num(pct(p.runnable_share)),
          num(pct(p.sleeping_share)), num(pct(p.uninterruptible_share)), num(fixed(p.read_mib, 1)), num(fixed(p.read_mib_per_s, 2)), num(fixed(p.page_cache_miss_mib, 1))];
      })));
    if (D.processes.omitted) { ps.appendChild(para(D.processes.omitted + ' more processes not shown (report.md lists them all).', 'muted')); }
    ps.appendChild(para(D.reader_line));
  }

  if (D.writer_rows.length) {
    var ws = section('writers', 'Writers');
    ws.appendChild(para('Where the writer threads\u2019 time went (shares of their thread time; on-CPU time split by their CPU samples, ' +
      'blocked time by their off-CPU stacks and syscall times, as the write verdicts count it).'));
    ws.appendChild(table(D.writer_columns, D.writer_rows.map(function (r) {
      return r.map(function (c, i) { return i === 0 ? c : num(c); });
    })));
  }

  var ds = section('devices', 'Devices');
  if (!D.devices.length) {
    ds.appendChild(para('No block-device activity recorded (io.json missing or no devices).', 'muted'));
  } else {
    var lat = function (x) { return x === null ? 'n/a' : '\u2264 ' + fixed(x, 0) + ' \u00b5s'; };
    ds.appendChild(table(['device', 'read (MiB)', 'read MiB/s', 'read requests', 'read latency p50 / p99', 'write (MiB)', 'write MiB/s',
      'write requests', 'write latency p50 / p99', 'busy', 'p50 latency', 'p99 latency'],
      D.devices.map(function (d) {
        return [{ code: d.name }, num(fixed(d.read_mib, 1)), num(fixed(d.read_mib_per_s, 2)), num(String(d.read_requests)), num(d.read_latency),
          num(fixed(d.write_mib, 1)), num(fixed(d.write_mib_per_s, 2)), num(String(d.write_requests)), num(d.write_latency),
          num(pct(d.utilization)), num(lat(d.latency_p50_us)), num(lat(d.latency_p99_us))];
      })));
    if (D.io_line) { ds.appendChild(para(D.io_line)); }
    if (D.dirty_line) { ds.appendChild(para(D.dirty_line)); }
  }

  var ss = section('system', 'System');
  ss.appendChild(table(['fact', 'value'], D.system.map(function (r) { return [r[0], r[1]]; })));
  if (D.system_notes.length) { ss.appendChild(el('ul', null, D.system_notes.map(function (n) { return el('li', { text: n }); }))); }
  ss.appendChild(el('h3', { text: 'Command' }));
  ss.appendChild(el('pre', { cls: 'cmd', text: D.command }));
  D.command_notes.forEach(function (n) { ss.appendChild(para(n)); });

  var renderMs = performance.now();
  document.body.setAttribute('data-render-ms', renderMs.toFixed(0));
  app.appendChild(el('footer', { text: 'storprof report.html: self-contained (no network). Drawn ' + renderMs.toFixed(0) +
    ' ms after the page started loading. The same facts as text: report.md and verdict.json in the session directory.' }));

  // --- self-test (#selftest): used by the browser test -------------------------------
  if (location.hash === '#selftest') {
    var result = { render_ms: renderMs, errors: errors };
    var fv = views.oncpu.view, rootValue = fv.flame.root[1], best = null;
    fv.box.querySelectorAll('.frame').forEach(function (f) {
      var n = f.__node;
      if (f.__path.length > 1 && n[1] < rootValue && (!best || n[1] > best.__node[1])) { best = f; }
    });
    if (best) {
      var target = best.__node, name = names[target[0]];
      result.clicked = name;
      result.clicked_share = target[1] / rootValue;
      var before = fv.box.querySelectorAll('.frame').length;
      best.dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, view: window }));
      var focusEl = null;
      fv.box.querySelectorAll('.frame').forEach(function (f) { if (f.__node === target && !/ancestor/.test(f.className)) { focusEl = f; } });
      result.frames_before = before;
      result.frames_after = fv.box.querySelectorAll('.frame').length;
      result.zoomed = fv.focus() === target && focusEl !== null &&
        focusEl.getBoundingClientRect().width >= fv.box.clientWidth * 0.98;
      fv.reset.dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, view: window }));
      result.reset = fv.path.length === 1;
      fv.search.value = name;
      fv.search.dispatchEvent(new Event('input', { bubbles: true }));
      result.search_share = fv.matchShare;
      result.search_text = fv.matchText.textContent;
      result.highlighted = fv.box.querySelectorAll('.frame.match').length;
    }
    if (views.diff) {
      tabs.querySelector('button[data-kind="diff"]').dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, view: window }));
      result.diff_frames = views.diff.view.box.querySelectorAll('.frame').length;
      result.diff_shown = !views.diff.host.hidden && views.oncpu.host.hidden;
      showFlame('oncpu');
    }
    var spanBefore = view[1] - view[0];
    zin.dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, view: window }));
    result.timeline_zoom = (view[1] - view[0]) / spanBefore;
    result.timeline_svgs = tbox.querySelectorAll('svg').length;
    result.errors = errors;
    var out = document.getElementById('selftest');
    out.textContent = JSON.stringify(result);
    out.hidden = false;
  }
}());
