/*
 * report_lib.js: what report.js draws a `flare report --html` page with
 * (src/cli/report_html*.c): elements (tables, rows that fold away, pills,
 * facts), numbers and times written as the text report writes them, the
 * charts (time series with uPlot, third_party/uplot, in the page before
 * this script; bars as plain elements) and the page's ending, which counts
 * the charts as they draw and then says whether the page drew. Embedded in
 * every page, in its own script block before report.js
 * (src/cli/html_assets.h); it hands all of it to report.js on one frozen
 * object, window.flareReportLib, its only global.
 *
 * It must never read a section's data or draw a section (report.js does),
 * never put text from the session into the page as markup (only
 * textContent and attribute values), never fetch anything (the page's
 * Content-Security-Policy forbids it besides), and never set <body
 * data-rendered> more than once: when the page ends (finish()), "ok" if
 * every chart it counted drew, or "error" with the reasons given to fail()
 * shown at the top of the page. <body data-charts-expected> and <body
 * data-charts-drawn> count the charts, for the browser test.
 */
(function () {
  'use strict';

  var charts = { expected: 0, drawn: 0 };
  var errors = [];
  var finished = false;
  var CHART_AXIS = 84; /* px of the y axis: every chart's plot starts at the same x */

  /* ---- elements ---- */

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function add(parent, child) {
    parent.appendChild(child);
    return child;
  }

  function empty(parent, text) {
    return add(parent, el('p', 'empty', text));
  }

  function note(parent, text) {
    return add(parent, el('p', 'note', text));
  }

  function table(parent, headings, numeric) {
    var wrap = add(parent, el('div', 'table-scroll'));
    var t = add(wrap, el('table', 'data'));
    var head = add(add(t, el('thead')), el('tr'));
    headings.forEach(function (heading, i) {
      add(head, el('th', numeric && numeric[i] ? 'num' : '', heading));
    });
    return add(t, el('tbody'));
  }

  function row(body, cells, numeric) {
    var tr = add(body, el('tr'));
    cells.forEach(function (cell, i) {
      var td = add(tr, el('td', numeric && numeric[i] ? 'num' : ''));
      if (cell instanceof Node) td.appendChild(cell);
      else td.textContent = cell === null || cell === undefined ? '-' : String(cell);
    });
    return tr;
  }

  /* Hides the rows of a long table past the first limit, behind a button
   * that shows them all (and hides them again). */
  function collapse(body, limit, what) {
    var rows = body.children;
    if (rows.length <= limit + 5) return;
    var total = rows.length;
    for (var i = limit; i < total; i++) rows[i].hidden = true;
    var wrap = body.parentNode.parentNode;
    var button = el('button', 'more', 'Show all ' + fmtCount(total) + ' ' + what);
    button.setAttribute('type', 'button');
    button.addEventListener('click', function () {
      var hide = !rows[limit].hidden;
      for (var j = limit; j < total; j++) rows[j].hidden = hide;
      button.textContent = hide ? 'Show all ' + fmtCount(total) + ' ' + what : 'Show the first ' + limit + ' only';
    });
    wrap.parentNode.insertBefore(button, wrap.nextSibling);
  }

  function pill(text, kind) {
    return el('span', 'pill ' + kind, text);
  }

  /* A term and its value (text, or a node) in a definition list; '-' for
   * no value. Returns the value's element. */
  function fact(list, term, value) {
    add(list, el('dt', '', term));
    var dd = add(list, el('dd'));
    if (value instanceof Node) dd.appendChild(value);
    else dd.textContent = value === null || value === undefined || value === '' ? '-' : String(value);
    return dd;
  }

  /* ---- numbers, as the text report writes them (src/cli/format.c) ---- */

  function scaled(value, unit, steps) {
    var step = steps.length;
    while (step > 0 && value < steps[step - 1][0]) step--;
    if (step === 0) return Math.round(value) + ' ' + unit;
    var s = steps[step - 1];
    return (value / s[1]).toFixed(s[2]) + ' ' + s[3];
  }

  function fmtDuration(ns) {
    if (ns === null || ns === undefined) return '-';
    return scaled(ns, 'ns', [[1e4, 1e3, 1, 'us'], [1e7, 1e6, 1, 'ms'], [1e10, 1e9, 2, 's']]);
  }

  function fmtBytes(bytes) {
    return scaled(bytes, 'B', [[10240, 1024, 1, 'KiB'], [10485760, 1048576, 1, 'MiB'],
      [10737418240, 1073741824, 2, 'GiB']]);
  }

  function fmtCount(n) {
    if (n === null || n === undefined) return '-';
    return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }

  function fmtPct(p) {
    return p === null || p === undefined || !isFinite(p) ? '-' : p.toFixed(1) + '%';
  }

  function fmtCompact(v) {
    var a = Math.abs(v);
    if (a >= 1e12) return (v / 1e12).toFixed(1) + ' T';
    if (a >= 1e9) return (v / 1e9).toFixed(1) + ' G';
    if (a >= 1e6) return (v / 1e6).toFixed(1) + ' M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + ' k';
    if (a >= 100 || v === Math.round(v)) return String(Math.round(v));
    return v.toPrecision(3);
  }

  /* Decimal bytes, as Nsight Compute and metric_labels.c write them. */
  function fmtBytesDecimal(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + ' GB';
    if (a >= 1e6) return (v / 1e6).toFixed(1) + ' MB';
    if (a >= 1e3) return (v / 1e3).toFixed(1) + ' kB';
    return Math.round(v) + ' B';
  }

  /* A time axis of seconds (or, with scale 1e-3, milliseconds), its unit
   * chosen from the visible range. */
  function timeFormatter(seconds_per_unit) {
    return function (u, values) {
      var range = (u.scales.x.max - u.scales.x.min) * seconds_per_unit;
      var unit = range < 2e-3 ? ['us', 1e6] : range < 2 ? ['ms', 1e3] : ['s', 1];
      return values.map(function (v) {
        if (v === null) return '';
        var x = v * seconds_per_unit * unit[1];
        return (Math.abs(x) >= 100 ? x.toFixed(0) : +x.toPrecision(3)) + ' ' + unit[0];
      });
    };
  }

  function fmtSeconds(s) {
    return s === null || s === undefined ? '-' : fmtDuration(Math.max(0, s * 1e9));
  }

  /* How a PM metric is shown, from its unit (metric_labels.h). */
  function unitFormat(unit) {
    switch (unit) {
      case 'percent': return function (v) { return v.toFixed(1) + '%'; };
      case 'bytes': return fmtBytesDecimal;
      case 'ns': return fmtDuration;
      case 'cycles': return function (v) { return fmtCompact(v) + ' cyc'; };
      default: return fmtCompact;
    }
  }

  /* ---- charts: each counted as expected, then as drawn ---- */

  /* The colours of a chart's series, in turn. */
  var GAUGE_COLORS = Object.freeze(['#2f6fdf', '#17945f', '#c2410c', '#8a5cd1', '#0e7490', '#a16207']);

  function chartDrawn(host) {
    if (host.getAttribute('data-drawn') === '1') return;
    if (!host.querySelector('canvas')) {
      errors.push('a chart drew without a canvas');
      return;
    }
    host.setAttribute('data-drawn', '1');
    charts.drawn++;
    maybeFinish();
  }

  /* Shades spans ({start, end, kind}, in x units) under the series. */
  function shader(spans) {
    return function (u) {
      if (!spans || spans.length === 0) return;
      var ctx = u.ctx, box = u.bbox, min = u.scales.x.min, max = u.scales.x.max;
      ctx.save();
      spans.forEach(function (span) {
        if (span.end < min || span.start > max) return;
        var x0 = Math.max(u.valToPos(span.start, 'x', true), box.left);
        var x1 = Math.min(u.valToPos(span.end, 'x', true), box.left + box.width);
        ctx.fillStyle = span.kind === 'storm' ? 'rgba(220,38,38,0.16)' : 'rgba(245,158,11,0.24)';
        ctx.fillRect(x0, box.top, Math.max(x1 - x0, 2), box.height);
      });
      ctx.restore();
    };
  }

  /* A y range around [min, max] with room above and below; a constant
   * series gets a band around its value instead of uPlot's guess. */
  function paddedRange(u, min, max) {
    if (min === null || max === null) return [0, 1];
    if (min === max) {
      var pad = Math.abs(min) * 0.1 || 1;
      return [min >= 0 && min - pad < 0 ? 0 : min - pad, max + pad];
    }
    var span = max - min;
    return [min >= 0 && min - span * 0.08 < 0 ? 0 : min - span * 0.08, max + span * 0.08];
  }

  /*
   * A time series chart under parent: spec.xs (ascending), spec.series
   * [{label, values, color, fill}], spec.fmt (values), spec.xScale (1 for
   * seconds, 1e-3 for milliseconds), spec.spans, spec.range (y), spec.sync
   * (cursor sync key), spec.xRange ([min, max] of x), spec.height,
   * spec.onDraw(u) once drawn.
   */
  function timeChart(parent, spec) {
    var block = add(parent, el('div', 'chart-block'));
    var title = add(block, el('div', 'chart-title', spec.title));
    if (spec.sub) add(title, el('span', 'sub', '  ' + spec.sub));
    var host = add(block, el('div', 'chart'));
    var width = Math.max(360, Math.floor(parent.clientWidth || 1100) - 4);
    var fmtTime = timeFormatter(spec.xScale);
    charts.expected++;
    var once = false;
    var options = {
      width: width,
      height: spec.height || 150,
      scales: {
        x: spec.xRange ? { time: false, range: function () { return spec.xRange; } } : { time: false },
        y: { range: spec.range ? function () { return spec.range; } : paddedRange }
      },
      cursor: { sync: { key: spec.sync || 'flare' }, drag: { x: true, y: false } },
      legend: { show: true },
      series: [{
        label: spec.xScale === 1 ? 'time' : 'time in window',
        value: function (u, v) { return v === null ? '-' : fmtTime(u, [v])[0]; }
      }].concat(spec.series.map(function (s) {
        return {
          label: s.label, stroke: s.color, width: 1.25, fill: s.fill,
          points: { show: false },
          value: function (u, v) { return v === null || v === undefined ? '-' : spec.fmt(v); }
        };
      })),
      axes: [
        { values: fmtTime, size: 34 },
        { values: function (u, vals) { return vals.map(function (v) { return v === null ? '' : (spec.tick || spec.fmt)(v); }); },
          size: CHART_AXIS }
      ],
      hooks: {
        drawClear: [shader(spec.spans)],
        draw: [function (u) {
          if (once) return;
          once = true;
          if (spec.onDraw) spec.onDraw(u);
          chartDrawn(host);
        }]
      }
    };
    var data = [spec.xs].concat(spec.series.map(function (s) { return s.values; }));
    try {
      new uPlot(options, data, host);
    } catch (e) {
      errors.push('chart "' + spec.title + '": ' + e.message);
      add(block, el('p', 'section-error', 'This chart could not be drawn: ' + e.message));
    }
    return block;
  }

  /* A bar chart of rows: label(row), fraction(row) (0..1 of the widest
   * bar), value(row) (text), detail(row) (muted text). */
  function barChart(parent, rows, spec) {
    charts.expected++;
    var grid = add(parent, el('div', 'bars'));
    rows.forEach(function (r) {
      var label = add(grid, el('div', 'label', spec.label(r)));
      label.setAttribute('title', spec.label(r));
      var track = add(grid, el('div', 'track'));
      var fill = add(track, el('div', 'fill'));
      fill.style.width = (Math.max(0, Math.min(1, spec.fraction(r))) * 100).toFixed(2) + '%';
      var value = add(grid, el('div', 'value', spec.value(r)));
      if (spec.detail) add(value, el('span', 'sub', '  ' + spec.detail(r)));
    });
    charts.drawn++;
    grid.setAttribute('data-drawn', '1');
    return grid;
  }

  /* Speed-of-light bars: label, pct (0..100 of the peak, or null), text,
   * metric (its name, as a tooltip), side (the colour: compute or memory). */
  function solBars(parent, bars) {
    var grid = add(parent, el('div', 'sol'));
    bars.forEach(function (b) {
      var label = add(grid, el('div', 'label', b.label));
      label.setAttribute('title', b.metric);
      var track = add(grid, el('div', 'track'));
      var fill = add(track, el('div', 'fill ' + b.side));
      var pct = b.pct === null ? 0 : Math.max(0, Math.min(100, b.pct));
      fill.style.width = pct.toFixed(2) + '%';
      add(grid, el('div', 'value', b.text));
    });
    charts.expected++;
    charts.drawn++;
    grid.setAttribute('data-drawn', '1');
  }

  /* ---- the page's ending ---- */

  /* Shows text in the box at the top of the page (as an error, in red),
   * or hides the box when text is empty. */
  function status(text, isError) {
    var box = document.getElementById('page-status');
    if (!box) return;
    box.textContent = text;
    box.className = 'page-status' + (isError ? ' error' : text ? '' : ' hidden');
  }

  /* Ends the page, once, after finish(): when every chart drew, when
   * something failed, or at once with force. Until then it only updates
   * the counts on <body>. */
  function maybeFinish(force) {
    if (finished || !charts.ready) return;
    var body = document.body;
    body.setAttribute('data-charts-expected', String(charts.expected));
    body.setAttribute('data-charts-drawn', String(charts.drawn));
    if (!errors.length && charts.drawn < charts.expected && !force) return;
    finished = true;
    if (!errors.length && charts.drawn < charts.expected)
      errors.push((charts.expected - charts.drawn) + ' of ' + charts.expected + ' charts did not draw');
    if (errors.length) {
      body.setAttribute('data-rendered', 'error');
      status('This page did not draw completely: ' + errors.join('; '), true);
    } else {
      body.setAttribute('data-rendered', 'ok');
      status('', false);
    }
    /* For the benchmark and the screenshots: when it was done, and how
     * tall the page is then. */
    body.setAttribute('data-rendered-ms', String(Math.round(window.performance.now())));
    var main = document.querySelector('main');
    body.setAttribute('data-page-height', String(Math.ceil(main.getBoundingClientRect().bottom + window.scrollY)));
  }

  /* Records why the page did not draw whole: the page ends as "error",
   * with every reason given, at the top of the page. */
  function fail(reason) {
    errors.push(reason);
  }

  /* Says every section has been drawn, though charts may still be drawing:
   * the page ends as soon as the last one has drawn, or at once when force
   * is set (a chart that has not drawn by then is an error). */
  function finish(force) {
    charts.ready = true;
    maybeFinish(force);
  }

  window.flareReportLib = Object.freeze({
    el: el, add: add, empty: empty, note: note, table: table, row: row, collapse: collapse,
    pill: pill, fact: fact,
    fmtDuration: fmtDuration, fmtBytes: fmtBytes, fmtCount: fmtCount, fmtPct: fmtPct,
    fmtCompact: fmtCompact, fmtSeconds: fmtSeconds, unitFormat: unitFormat,
    GAUGE_COLORS: GAUGE_COLORS, timeChart: timeChart, barChart: barChart, solBars: solBars,
    status: status, fail: fail, finish: finish
  });
})();
