/*
 * report.js: draws a `flare report --html` page (src/cli/report_html*.c)
 * from the JSON data block of each of its sections, a renderer per
 * section, with the elements, formatters and charts of report_lib.js
 * (window.flareReportLib, in its own script block before this one, after
 * uPlot's). Embedded in every page (src/cli/html_assets.h).
 *
 * It must never put text from the session into the page as markup (only
 * textContent and attribute values), never fetch anything (the page's
 * Content-Security-Policy forbids it besides), never count charts or set
 * <body data-rendered> itself (report_lib.js's finish() does, "ok" or
 * "error"), and always end by calling finish(), or, when report_lib.js is
 * missing, by setting data-rendered to "error" on its own. A page opened
 * with ?section=ID draws that section alone (for screenshots).
 */
(function () {
  'use strict';

  var lib = window.flareReportLib;
  if (!lib) {
    document.body.setAttribute('data-rendered', 'error');
    var box = document.getElementById('page-status');
    if (box) {
      box.textContent = 'This page did not draw: its script report_lib.js did not load';
      box.className = 'page-status error';
    }
    return;
  }
  var el = lib.el, add = lib.add, empty = lib.empty, note = lib.note, table = lib.table, row = lib.row;
  var collapse = lib.collapse, pill = lib.pill, fact = lib.fact;
  var fmtDuration = lib.fmtDuration, fmtBytes = lib.fmtBytes, fmtCount = lib.fmtCount, fmtPct = lib.fmtPct;
  var fmtCompact = lib.fmtCompact, fmtSeconds = lib.fmtSeconds, unitFormat = lib.unitFormat;
  var GAUGE_COLORS = lib.GAUGE_COLORS, timeChart = lib.timeChart, barChart = lib.barChart;
  var solBars = lib.solBars, status = lib.status, fail = lib.fail, finish = lib.finish;

  /* ---- session ---- */

  function renderSession(body, d) {
    if (d.command) document.title = 'flare report: ' + d.command;
    var list = add(body, el('dl', 'facts'));
    fact(list, 'command', d.command || '(unknown)').className = 'mono';
    fact(list, 'host', d.host);
    fact(list, 'started', d.started);
    fact(list, 'duration', d.ended && d.duration_ns !== null ? fmtDuration(d.duration_ns)
      : 'did not end: killed, crashed or still running (' + fmtDuration(d.span_ns) + ' recorded)');
    var exit = d.exit_status === null ? 'unknown' : String(d.exit_status);
    fact(list, 'exit status', pill(exit, d.exit_status === 0 ? 'ok' : d.exit_status === null ? 'other' : 'failed'));
    fact(list, 'flare version', d.flare_version +
      (d.report_flare_version && d.report_flare_version !== d.flare_version
        ? ' (this page: flare ' + d.report_flare_version + ')' : ''));
    fact(list, 'recorded', fmtCount(d.processes) + ' process(es), ' + fmtCount(d.kernels) + ' kernels, ' +
      fmtCount(d.copies) + ' copies/memsets, ' + fmtCount(d.scopes) + ' scopes; kernel GPU time ' +
      fmtDuration(d.kernel_gpu_ns));
    if (d.untimed_launches + d.untimed_copies > 0)
      fact(list, 'untimed', fmtCount(d.untimed_launches) + ' more kernel launches and ' +
        fmtCount(d.untimed_copies) + ' copies/memsets ran during launch storms, counted but not timed');
    fact(list, 'session', d.directory).className = 'mono';
    add(body, el('h3', '', 'Capabilities'));
    if (!d.capabilities.length) {
      empty(body, 'No GPU backend started: kernels come from the simulated device, if any.');
      return;
    }
    var rows = table(body, ['feature', 'status', 'requested', 'reason', 'pid']);
    d.capabilities.forEach(function (c) {
      row(rows, [c.feature, pill(c.status, c.status), c.requested ? 'yes' : 'no', c.reason, c.pid]);
    });
  }

  /* ---- timeline ---- */

  /* ---- timeline ---- */

  /* NVML metrics by their names in the metrics table (docs/schema.md). */
  var GAUGE_TITLES = {
    gpu_utilization_pct: 'GPU utilization', memory_used_bytes: 'Memory used', power_mw: 'Power',
    sm_clock_mhz: 'SM clock', temperature_c: 'Temperature'
  };

  /* How an NVML metric (docs/schema.md: the unit is in its name) is shown. */
  function gaugeFormat(name) {
    if (/_pct$/.test(name)) return { unit: '%', fmt: function (v) { return v.toFixed(0) + '%'; }, range: [0, 100] };
    if (/_mw$/.test(name)) return { unit: 'W', fmt: function (v) { return (v / 1000).toFixed(1) + ' W'; } };
    if (/_mhz$/.test(name)) return { unit: 'MHz', fmt: function (v) { return fmtCount(v) + ' MHz'; } };
    if (/_bytes$/.test(name)) return { unit: '', fmt: fmtBytes };
    if (/_c$/.test(name)) return { unit: '°C', fmt: function (v) { return v.toFixed(0) + ' °C'; } };
    return { unit: '', fmt: fmtCompact };
  }

  function timelineSpans(d, device) {
    var spans = [];
    d.windows.forEach(function (w) { spans.push({ start: w.start_s, end: w.end_s, kind: 'window' }); });
    d.storms.forEach(function (s) {
      if (s.device < 0 || s.device === device) spans.push({ start: s.start_s, end: s.end_s, kind: 'storm' });
    });
    return spans;
  }

  function renderDevice(body, d, dev) {
    var box = add(body, el('div', 'device'));
    add(box, el('h3', '', 'Device ' + dev.device + (dev.name ? ': ' + dev.name : '')));
    var spans = timelineSpans(d, dev.device);
    if (dev.busy) {
      note(box, 'Busy ' + fmtPct(dev.busy_pct) + ' of the session (' + fmtDuration(dev.busy_ns) +
        ' with at least one kernel running, overlapping kernels counted once), ' +
        fmtCount(dev.kernels) + ' kernels.');
      timeChart(box, {
        title: 'GPU busy', sub: '% of each of ' + dev.busy.t.length + ' slices of the session',
        xs: dev.busy.t, series: [{ label: 'busy', values: dev.busy.v, color: '#2f6fdf', fill: 'rgba(47,111,223,0.18)' }],
        fmt: function (v) { return v.toFixed(0) + '%'; }, range: [0, 100], xScale: 1, spans: spans,
        sync: 'timeline', height: 150, xRange: [d.from_s, d.to_s]
      });
    } else {
      empty(box, 'No kernels ran on this device.');
    }
    if (!dev.metrics.length) {
      note(box, 'No NVML metrics for this device (flare samples them on CUDA devices).');
      return;
    }
    /* A metric sampled once (a start-up time such as pm_open_to_first_sample_ns)
       is a fact, not a time series: said in words, not drawn. */
    var once = dev.metrics.filter(function (m) { return m.samples < 2; });
    dev.metrics.filter(function (m) { return m.samples >= 2; }).forEach(function (m, i) {
      var g = gaugeFormat(m.name);
      var title = GAUGE_TITLES[m.name] ? GAUGE_TITLES[m.name] + (g.unit ? ' (' + g.unit + ')' : '') : m.name;
      timeChart(box, {
        title: title, sub: m.name + ' · ' + fmtCount(m.samples) + ' samples; min ' + g.fmt(m.min) + ', mean ' +
          g.fmt(m.mean) + ', max ' + g.fmt(m.max),
        xs: m.t, series: [{ label: GAUGE_TITLES[m.name] || m.name, values: m.v, color: GAUGE_COLORS[i % GAUGE_COLORS.length] }],
        fmt: g.fmt, tick: g.tick, range: g.range, xScale: 1, spans: spans, sync: 'timeline', height: 110,
        xRange: [d.from_s, d.to_s]
      });
    });
    if (once.length)
      note(box, 'Sampled once: ' + once.map(function (m) {
        return m.name + ' = ' + gaugeFormat(m.name).fmt(m.max);
      }).join('; ') + '.');
  }

  function renderTimeline(body, d) {
    var legend = add(body, el('div', 'legend-row'));
    var w = add(legend, el('span'));
    add(w, el('span', 'swatch window'));
    add(w, document.createTextNode('deep-profiling window (' + d.windows.length + ')'));
    var s = add(legend, el('span'));
    add(s, el('span', 'swatch storm'));
    add(s, document.createTextNode('launch storm (' + d.storms.length + ')'));
    add(legend, el('span', '', 'Drag across a chart to zoom; double-click to zoom out.'));
    if (!d.devices.length) {
      empty(body, 'No kernel ran and no device metric was recorded in this session.');
    }
    d.devices.forEach(function (dev) { renderDevice(body, d, dev); });
    if (d.left_out > 0)
      note(body, fmtCount(d.left_out) + ' samples of devices or metrics past the page\'s limits (64 devices, 32 metrics each) are not drawn.');
    add(body, el('h3', '', 'Deep windows and launch storms'));
    if (!d.windows.length && !d.storms.length) {
      empty(body, 'None: no deep-profiling window opened and no launch storm was recorded.');
      return;
    }
    var rows = table(body, ['what', 'pid', 'device', 'from', 'to', 'length', 'detail'],
      [false, true, true, true, true, true, false]);
    d.windows.forEach(function (x) {
      row(rows, ['window ' + x.id, x.pid, 'all', '+' + fmtSeconds(x.start_s), '+' + fmtSeconds(x.end_s),
        fmtSeconds(x.end_s - x.start_s), x.kind + (x.label ? ': ' + x.label : '') + (x.closed ? '' : ' (still open)')],
        [false, true, true, true, true, true, false]);
    });
    d.storms.forEach(function (x) {
      row(rows, ['launch storm', x.pid, x.device < 0 ? 'all' : x.device, '+' + fmtSeconds(x.start_s),
        '+' + fmtSeconds(x.end_s), fmtSeconds(x.end_s - x.start_s),
        fmtCount(x.untimed_launches) + ' launches counted, not timed' + (x.still_open ? ' (open at the end)' : '')],
        [false, true, true, true, true, true, false]);
    });
  }

  /* ---- kernels and scopes ---- */

  function renderKernels(body, d) {
    if (!d.rows.length) {
      empty(body, 'No kernels were recorded.');
      return;
    }
    note(body, 'The ' + d.rows.length + ' kernels with the most GPU time, of ' + fmtDuration(d.all_ns) +
      ' in all kernels (bars relative to the first; the percentage is of all kernels\' GPU time).');
    var max = d.rows[0].total_ns || 1;
    barChart(body, d.rows, {
      label: function (r) { return r.name; },
      fraction: function (r) { return r.total_ns / max; },
      value: function (r) { return fmtPct(r.pct) + '  ' + fmtDuration(r.total_ns); },
      detail: function (r) { return fmtCount(r.count) + '×'; }
    });
    var num = [false, true, true, true, true, true, true];
    var rows = table(body, ['kernel', 'count', 'total', '% GPU', 'mean', 'p50', 'p99'], num);
    d.rows.forEach(function (r) {
      var name = el('span', 'name', r.name);
      row(rows, [name, fmtCount(r.count), fmtDuration(r.total_ns), fmtPct(r.pct), fmtDuration(r.mean_ns),
        fmtDuration(r.p50_ns), fmtDuration(r.p99_ns)], num);
    });
  }

  function renderScopes(body, d) {
    if (d.unavailable) {
      empty(body, 'GPU time per scope is not available: ' + d.unavailable + '.');
      return;
    }
    if (!d.rows.length) {
      empty(body, 'No scopes or NVTX ranges were recorded.');
      return;
    }
    note(body, 'Kernel time inside each scope or NVTX range, summed over its occurrences (a kernel ' +
      'inside nested scopes counts for each of them); the percentage is of all kernels\' GPU time.');
    var max = Math.max.apply(null, d.rows.map(function (r) { return r.gpu_ns; })) || 1;
    barChart(body, d.rows, {
      label: function (r) { return r.name; },
      fraction: function (r) { return r.gpu_ns / max; },
      value: function (r) {
        return fmtDuration(r.gpu_ns) + '  ' + (d.kernel_gpu_ns > 0 ? fmtPct(100 * r.gpu_ns / d.kernel_gpu_ns) : '');
      },
      detail: function (r) { return fmtCount(r.count) + '× in ' + fmtDuration(r.duration_ns) + ' wall'; }
    });
    var num = [false, true, true, true, true];
    var rows = table(body, ['scope', 'occurrences', 'wall time', 'GPU time', 'kernels'], num);
    d.rows.forEach(function (r) {
      row(rows, [el('span', 'name', r.name), fmtCount(r.count), fmtDuration(r.duration_ns),
        fmtDuration(r.gpu_ns), fmtCount(r.kernels)], num);
    });
  }

  /* ---- PM samples ---- */

  var LANE_ROW = 18;

  /* A hue (0..359) from a name: the same name, the same colour. */
  function hue(text) {
    var h = 0;
    for (var i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) >>> 0;
    return h % 360;
  }

  function drawLane(box, w) {
    var scopes = w.scopes;
    if (!scopes.length) {
      note(box, 'No scope or NVTX range of this process overlapped the window.');
      return null;
    }
    var depth = 0;
    scopes.forEach(function (s) { depth = Math.max(depth, s.depth); });
    var lane = add(box, el('div', 'lane'));
    lane.style.height = ((depth + 1) * LANE_ROW + 2) + 'px';
    scopes.forEach(function (s) {
      var item = add(lane, el('div', 'lane-scope', s.name));
      var left = Math.max(0, s.start_ms / w.length_ms);
      var width = Math.max(0, Math.min(1, s.end_ms / w.length_ms) - left);
      item.style.left = (left * 100).toFixed(3) + '%';
      item.style.width = 'max(2px, ' + (width * 100).toFixed(3) + '%)';
      item.style.top = (s.depth * LANE_ROW + 1) + 'px';
      item.style.background = 'hsl(' + hue(s.name) + ', 55%, 45%)';
      item.setAttribute('title', s.name + ' (thread ' + s.thread + '): ' +
        fmtDuration((s.end_ms - s.start_ms) * 1e6) + (s.open ? ', still open at the end' : ''));
    });
    var caption = 'Scope lane: the scopes and NVTX ranges of pid ' + w.pid +
      ' that overlapped the window, a row per nesting depth, on the charts\' time axis.';
    if (w.scopes_total > scopes.length)
      caption += ' ' + fmtCount(w.scopes_total - scopes.length) + ' more are not drawn.';
    add(box, el('div', 'lane-caption', caption));
    return lane;
  }

  function renderWindow(body, d, w) {
    var box = add(body, el('div', 'window'));
    var name = 'Window ' + w.id + ' (' + w.kind + (w.label ? ': ' + w.label : '') + ')';
    add(box, el('h3', '', name + (w.device !== null ? ' on device ' + w.device : '') + ', pid ' + w.pid));
    note(box, 'Opened ' + fmtSeconds(w.open_s) + ' after the session started, ' +
      fmtDuration(w.length_ms * 1e6) + ' long, closed by ' + (w.close_reason || '-') + '; ' +
      fmtCount(w.launches) + ' launches; engine ' + (w.engine || '-') + ' (' + (w.engine_status || '-') +
      (w.engine_reason ? ': ' + w.engine_reason : '') + ').');
    if (!w.drawn) {
      if (w.sample_rows === 0) empty(box, 'No PM samples were recorded in this window.');
      else empty(box, 'Its ' + fmtCount(w.sample_rows) + ' sample values are not drawn: the page draws the first ' +
        d.drawn_max + ' windows with samples (flare report lists them all).');
      return;
    }
    var lane = null;
    var place = function (u) {
      if (!lane) return;
      lane.style.marginLeft = u.over.style.left;
      lane.style.width = u.over.style.width;
    };
    var sync = 'pm-' + w.pid + '-' + w.id;
    w.metrics.forEach(function (m, i) {
      var fmt = unitFormat(m.unit);
      var sub = m.metric + ' · ' + fmtCount(m.samples) + ' samples; min ' + m.min_text + ', mean ' +
        m.mean_text + ', max ' + m.max_text;
      if (m.flagged > 0) sub += '; ' + fmtCount(m.flagged) + ' flagged, left out';
      if (!m.t.length) {
        add(box, el('div', 'chart-title', m.label + '  ' + sub));
        empty(box, 'No sample of this metric has a value.');
        return;
      }
      timeChart(box, {
        title: m.label, sub: sub, xs: m.t,
        series: [{ label: m.label, values: m.v, color: GAUGE_COLORS[i % GAUGE_COLORS.length],
          fill: 'rgba(47,111,223,0.08)' }],
        fmt: fmt, range: m.unit === 'percent' ? [0, 100] : undefined, xScale: 1e-3, sync: sync,
        height: 110, onDraw: place, xRange: [0, w.length_ms]
      });
    });
    if (w.metrics_left_out > 0)
      note(box, fmtCount(w.metrics_left_out) + ' sample values of metrics past the first 16 are not drawn.');
    lane = drawLane(box, w);
  }

  function renderPm(body, d) {
    if (!d.windows.length) {
      empty(body, 'No deep-profiling window opened in this session (flare trace --deep-when, ' +
        '--deep-after/--deep-for, or flare_window_open).');
      return;
    }
    note(body, 'Each window\'s PM samples over time, one chart per metric (flagged samples are counted, never drawn), ' +
      'with the scopes that covered them in a lane underneath.');
    d.windows.forEach(function (w) { renderWindow(body, d, w); });
    if (d.windows_total > d.windows.length)
      note(body, fmtCount(d.windows_total - d.windows.length) + ' more windows are not listed.');
  }

  /* ---- replay ---- */

  function values(parent, list) {
    var line = add(parent, el('div', 'values'));
    list.forEach(function (v) {
      var item = add(line, el('span'));
      item.setAttribute('title', v.metric);
      add(item, el('b', '', v.label));
      add(item, document.createTextNode(' ' + v.text));
    });
  }

  function renderRun(card, run) {
    var box = add(card, el('div', 'run'));
    var head = 'launch #' + run.launch_index + ' on device ' + run.device + ', pid ' + run.pid;
    if (run.declined) {
      add(box, el('div', 'run-head declined', head + ': declined: ' + (run.reason || 'no reason given')));
      return;
    }
    add(box, el('div', 'run-head', head + ': ' + run.passes + ' passes' +
      (run.collector ? ' (' + run.collector + ')' : '') + (run.reason ? '; ' + run.reason : '')));
    if (run.bars.length) solBars(box, run.bars);
    if (run.values.length) values(box, run.values);
    if (!run.bars.length && !run.values.length) empty(box, 'No metric was collected for this launch.');
  }

  /* What a value's status says, for the legend under a span's table
   * (statuses of range replay by PM sampling: docs/replay.md). */
  var VALUE_STATUSES = {
    flagged: 'a flagged sample overlapped the kernel: the value is the rest\'s',
    uncovered: 'samples cover under 90% of the kernel: no value',
    'below-minimum': 'the kernel is shorter than the method\'s minimum: no value',
    untimed: 'the kernel\'s times did not come: no value',
    'not-sampled': 'PM sampling has no such metric: no value',
    failed: 'sampling could not start in the pass: no value'
  };

  /* A span table's cell: the value (a bar for a throughput) and, where a
   * note says how it was produced, its error bound and a status marker. */
  function spanCell(c, column, seen) {
    if (c === null) return '-';
    var cell = el('span');
    var noted = c.method !== undefined;
    var valued = c.text !== 'n/a';
    if (noted) {
      cell.setAttribute('title', column.metric + ': ' + c.method + ', ' + (c.status || 'measured') +
        (c.error_bound !== undefined ? ', error bound ' + (c.error_bound === null ? 'unbounded' : c.error_bound) : ''));
      if (c.status) seen[c.status] = true;
    }
    if (noted && !valued && c.status && c.status !== 'measured') {
      add(cell, el('span', 'value-none', '\u2014'));
      add(cell, el('span', 'value-status ' + c.status, c.status));
      return cell;
    }
    if (c.pct !== undefined) {
      var bar = add(cell, el('span', 'cell-bar ' + (column.side || '')));
      add(bar, el('i')).style.width = Math.max(0, Math.min(100, c.pct)).toFixed(1) + '%';
    }
    add(cell, document.createTextNode(c.text));
    if (c.bound) {
      add(cell, el('span', 'value-bound', c.bound));
      seen['\u00b1'] = true;
    }
    if (noted && c.status && c.status !== 'measured') add(cell, el('span', 'value-status ' + c.status, c.status));
    return cell;
  }

  /* Under a span's table whose values carry notes: what the bound and each
   * status shown mean. */
  function spanLegend(card, seen) {
    var legend = add(card, el('div', 'legend-row replay-legend'));
    if (seen['\u00b1']) {
      var bound = add(legend, el('span'));
      add(bound, el('span', 'value-bound', '\u00b1'));
      add(bound, document.createTextNode(' error bound, as a share of the value (in its unit where the value is 0)'));
    }
    Object.keys(VALUE_STATUSES).forEach(function (status) {
      if (!seen[status]) return;
      var item = add(legend, el('span'));
      add(item, el('span', 'value-status ' + status, status));
      add(item, document.createTextNode(' ' + VALUE_STATUSES[status]));
    });
  }

  function renderSpan(body, span) {
    var card = add(body, el('div', 'kernel-card'));
    add(card, el('h3', '', 'span ' + span.name + (span.occurrence ? ' #' + span.occurrence : '') +
      ' (pid ' + span.pid + (span.device >= 0 ? ', device ' + span.device : '') + ')'));
    var facts = fmtCount(span.kernels) + ' kernels and ' + fmtCount(span.copies) + ' copies/memsets recorded; ';
    if (span.declined) {
      add(card, el('div', 'run-head declined', facts + 'declined: ' + (span.reason || 'no reason given')));
    } else {
      add(card, el('div', 'run-head', facts + span.passes + ' passes' + (span.reason ? '; ' + span.reason : '')));
    }
    if (span.method) add(card, el('div', 'run-head replay-method', span.method[0].toUpperCase() + span.method.slice(1) + '.'));
    if (!span.rows.length) {
      empty(card, 'No kernel of this span was stored.');
      return;
    }
    var headings = ['#', 'kernel'].concat(span.columns.map(function (c) { return c.label; }));
    var num = headings.map(function (h, i) { return i !== 1; });
    var rows = table(card, headings, num);
    rows.parentNode.className += ' wide';
    var th = rows.parentNode.querySelectorAll('th');
    span.columns.forEach(function (c, i) { th[i + 2].setAttribute('title', c.metric); });
    var seen = {};
    span.rows.forEach(function (r, i) {
      var kernel = el('span', 'name span-kernel' + (r.declined ? ' declined' : ''), r.kernel);
      kernel.setAttribute('title', r.kernel + (r.declined ? ': declined: ' + (r.reason || '') : ''));
      var cells = [String(i + 1), kernel];
      r.cells.forEach(function (c, column) { cells.push(spanCell(c, span.columns[column], seen)); });
      row(rows, cells, num);
    });
    collapse(rows, 20, 'kernels of the span');
    if (span.rows_left_out > 0) note(card, fmtCount(span.rows_left_out) + ' more kernels are not listed.');
    if (Object.keys(seen).length) spanLegend(card, seen);
  }

  function renderReplay(body, d) {
    var s = d.summary || {};
    if (!d.kernels.length && !d.spans.length) {
      empty(body, 'No kernel or range replay in this session (flare replay).');
      return;
    }
    if (d.kernels.length) {
      add(body, el('h3', '', 'Kernel replay'));
      note(body, fmtCount(s.launches) + ' launches of ' + fmtCount(s.kernels) + ' kernels: ' + fmtCount(s.replayed) +
        ' replayed, ' + fmtCount(s.declined) + ' declined. Bars: throughput against the unit\'s peak ' +
        '(compute in blue, memory in green).');
      d.kernels.forEach(function (k) {
        var card = add(body, el('div', 'kernel-card'));
        add(card, el('h3', '', k.kernel));
        note(card, fmtCount(k.launches) + ' launch(es): ' + fmtCount(k.replayed) + ' replayed, ' + fmtCount(k.declined) + ' declined');
        k.runs.forEach(function (run) { renderRun(card, run); });
        if (k.runs_left_out > 0) note(card, fmtCount(k.runs_left_out) + ' more launches are not shown (flare report lists them).');
      });
      if (d.kernels_left_out > 0) note(body, fmtCount(d.kernels_left_out) + ' more kernels are not shown.');
    }
    if (d.spans.length) {
      add(body, el('h3', '', 'Range replay'));
      note(body, fmtCount(s.spans) + ' spans: ' + fmtCount(s.spans_replayed) + ' replayed, ' + fmtCount(s.spans_declined) +
        ' declined. Each span\'s kernels in launch order.');
      d.spans.forEach(function (span) { renderSpan(body, span); });
      if (d.spans_left_out > 0) note(body, fmtCount(d.spans_left_out) + ' more spans are not shown.');
    }
  }

  /* ---- PC samples ---- */

  /* A PC window's hottest source lines, what share of its samples had no
   * line, or why it has none. */
  function renderPcLines(card, w) {
    var share = function (part, whole) { return (whole ? 100 * part / whole : 0).toFixed(1) + '%'; };
    add(card, el('h4', '', 'Hottest source lines'));
    if (!w.lines_recorded) {
      note(card, 'Source lines were not recorded: a session of an older flare (they are stored ' +
        'since schema version 12).');
      return;
    }
    if (!w.lines.length) {
      empty(card, 'None: the sampled code has no line information (build it with nvcc -lineinfo).');
      return;
    }
    var num = [true, true, false, true, false, false];
    var rows = table(card, ['samples', 'share', 'top stall', 'of line', 'file:line', 'function'], num);
    rows.parentNode.className += ' pc-lines';
    w.lines.forEach(function (x) {
      row(rows, [fmtCount(x.samples), share(x.samples, w.samples), x.stall,
        share(x.stall_samples, x.samples), x.file + ':' + x.line, x['function']], num);
    });
    if (w.lines_left_out > 0) note(card, fmtCount(w.lines_left_out) + ' more lines (flare report ' +
      '--format json has them all, section pc_lines).');
    if (w.samples > w.lines_samples) note(card, share(w.samples - w.lines_samples, w.samples) +
      ' of the samples are in code without line information (nvcc -lineinfo adds it).');
  }

  function renderPc(body, d) {
    if (!d.windows.length) {
      empty(body, 'No window ran PC sampling in this session (a rule\'s engine pc, flare trace ' +
        '--deep-engine pc, or flare_window_options.engine = "pc").');
      return;
    }
    note(body, 'Where in their kernels warps waited, per window that ran PC sampling: each ' +
      'stall reason\'s share of the samples, the scopes they ran in (a function\'s samples split ' +
      'over the scopes its kernels ran in, by kernel time), then the instructions and the source ' +
      'lines with the most samples.');
    d.windows.forEach(function (w) {
      var card = add(body, el('div', 'kernel-card'));
      add(card, el('h3', '', 'Window ' + w.id + ' of pid ' + w.pid + ', device ' + w.device + ': ' +
        fmtCount(w.samples) + ' samples'));
      add(card, el('h4', '', 'Stall reasons'));
      barChart(card, w.reasons, {
        label: function (r) { return r.name; },
        fraction: function (r) { return w.samples ? r.samples / w.samples : 0; },
        value: function (r) { return (w.samples ? 100 * r.samples / w.samples : 0).toFixed(1) + '%'; },
        detail: function (r) { return fmtCount(r.samples) + ' samples'; }
      });
      if (w.scopes && w.scopes.length) {
        add(card, el('h4', '', 'By scope (samples split by kernel time)'));
        barChart(card, w.scopes, {
          label: function (r) { return r.name; },
          fraction: function (r) { return w.samples ? r.samples / w.samples : 0; },
          value: function (r) { return (w.samples ? 100 * r.samples / w.samples : 0).toFixed(1) + '%'; },
          detail: function (r) { return fmtCount(Math.round(r.samples)) + ' samples, mostly ' + r.stall; }
        });
        if (w.scopes_left_out > 0) note(card, fmtCount(w.scopes_left_out) + ' more scopes (flare ' +
          'report --format json has them all, section pc_by_scope).');
      }
      add(card, el('h4', '', 'Hottest instructions'));
      var num = [true, true, false, false];
      var rows = table(card, ['samples', 'share', 'stall', 'function+offset'], num);
      w.top.forEach(function (x) {
        row(rows, [fmtCount(x.samples), (w.samples ? 100 * x.samples / w.samples : 0).toFixed(1) + '%',
          x.stall, x['function'] + '+' + x.offset + (x.file ? ' (' + x.file + ':' + x.line + ')' : (x.sass ? ' [' + x.sass + ']' : ''))], num);
      });
      if (w.rows > w.top.length) note(card, fmtCount(w.rows - w.top.length) + ' more (flare report ' +
        '--format json has them all, as does SELECT * FROM v_pc_samples).');
      renderPcLines(card, w);
    });
    if (d.left_out > 0) note(body, fmtCount(d.left_out) + ' more windows with PC samples are not ' +
      'listed (flare report --format json has them all).');
  }

  /* ---- SASS metrics ---- */

  /* The derived columns a SASS window shows: threads per warp instruction
   * and global sectors over the ideal, each only where the window counted
   * both of its metrics. */
  function sassColumns(w) {
    var columns = [];
    if (w.whole.threads !== null) columns.push({ title: 'threads', value: function (x) {
      return x.threads === null ? '-' : x.threads.toFixed(1); } });
    if (w.whole.sectors !== null) columns.push({ title: 'sectors', value: function (x) {
      return x.sectors === null ? '-' : x.sectors.toFixed(1) + 'x'; } });
    return columns;
  }

  /* A table of a SASS window's instructions or lines: executed, share,
   * the derived columns, then the named columns of each item. */
  function sassTable(card, w, kind, names, cells, items) {
    var share = function (x) { return (w.whole.executed ? 100 * x.executed / w.whole.executed : 0).toFixed(1) + '%'; };
    var columns = sassColumns(w);
    var num = [true, true].concat(columns.map(function () { return true; }), names.map(function (n) {
      return n === 'instructions'; }));
    var rows = table(card, ['executed', 'share'].concat(columns.map(function (c) { return c.title; }), names), num);
    rows.parentNode.className += ' ' + kind;
    items.forEach(function (x) {
      row(rows, [fmtCount(x.executed), share(x)].concat(columns.map(function (c) { return c.value(x); }),
        cells(x)), num);
    });
  }

  function renderSassWindow(body, w) {
    var card = add(body, el('div', 'kernel-card'));
    if (w.device === null) {
      add(card, el('h3', '', 'Window ' + w.id + ' of pid ' + w.pid + ': no SASS metrics stored'));
      note(card, 'Engine ' + w.engine + ', ' + (w.engine_status || 'no status') +
        (w.engine_reason ? ': ' + w.engine_reason : '') + '; ' + fmtCount(w.launches) + ' launches while open.');
      return;
    }
    add(card, el('h3', '', 'Window ' + w.id + ' of pid ' + w.pid + ', device ' + w.device + ': ' +
      fmtCount(w.metrics.reduce(function (most, m) { return Math.max(most, m.instructions); }, w.instructions)) +
      ' instructions counted'));
    add(card, el('h4', '', 'Metrics (exact counts over the window)'));
    var num = [false, true, true];
    var totals = table(card, ['metric', 'total', 'instructions'], num);
    w.metrics.forEach(function (m) { row(totals, [m.name, fmtCount(m.total), fmtCount(m.instructions)], num); });
    if (w.metrics_left_out > 0) note(card, fmtCount(w.metrics_left_out) + ' more metrics (flare report ' +
      '--format json has them all, section sass_metrics).');
    var whole = [];
    if (w.whole.threads !== null) whole.push(w.whole.threads.toFixed(1) + ' threads per warp instruction');
    if (w.whole.sectors !== null) whole.push('global memory sectors ' + w.whole.sectors.toFixed(1) + 'x the ideal');
    if (whole.length) note(card, 'Over the window: ' + whole.join(', ') + '.');
    if (w.scopes && w.scopes.length) {
      add(card, el('h4', '', 'By scope (' + w.scope_metric + ' split by kernels)'));
      barChart(card, w.scopes, {
        label: function (r) { return r.name; },
        fraction: function (r) { return w.scope_total ? r.value / w.scope_total : 0; },
        value: function (r) { return (w.scope_total ? 100 * r.value / w.scope_total : 0).toFixed(1) + '%'; },
        detail: function (r) { return fmtCount(Math.round(r.value)) + ' of ' + w.scope_metric; }
      });
      if (w.scopes_left_out > 0) note(card, fmtCount(w.scopes_left_out) + ' more scopes (flare ' +
        'report --format json has them all, section sass_by_scope).');
    }
    if (!w.instructions) {
      empty(card, 'No hottest instructions: smsp__sass_inst_executed was not counted.');
      return;
    }
    add(card, el('h4', '', 'Hottest instructions by smsp__sass_inst_executed'));
    sassTable(card, w, 'sass-top', ['function+offset'], function (x) {
      return [x['function'] + '+' + x.offset + (x.file ? ' (' + x.file + ':' + x.line + ')' : (x.sass ? ' [' + x.sass + ']' : ''))];
    }, w.top);
    if (w.top_left_out > 0) note(card, fmtCount(w.top_left_out) + ' more instructions (flare report ' +
      '--format json has them all, section sass_metrics).');
    add(card, el('h4', '', 'Hottest source lines by smsp__sass_inst_executed'));
    if (!w.lines_readable) empty(card, 'Not shown: they could not be read.');
    else if (!w.lines.length) empty(card, 'None: no instruction executed has line information (build with nvcc -lineinfo).');
    else {
      sassTable(card, w, 'sass-lines', ['instructions', 'file:line', 'function'], function (x) {
        return [fmtCount(x.instructions), x.file + ':' + x.line, x['function']];
      }, w.lines);
      if (w.lines_left_out > 0) note(card, fmtCount(w.lines_left_out) + ' more lines (flare report ' +
        '--format json has them all, section sass_lines).');
    }
    if (w.no_line_instructions > 0) note(card, fmtCount(w.no_line_instructions) + ' of ' + fmtCount(w.instructions) +
      ' instructions (' + (w.whole.executed ? 100 * w.no_line_executed / w.whole.executed : 0).toFixed(1) +
      '% of the executed) have no line information (nvcc -lineinfo adds it).');
  }

  function renderSass(body, d) {
    if (!d.windows.length) {
      empty(body, 'No window ran SASS metrics in this session (a rule\'s engine sass, or ' +
        'flare_window_options.engine = "sass").');
      return;
    }
    note(body, 'What each instruction executed, per window that ran SASS metrics: exact counts, not ' +
      'samples. threads: threads per warp instruction (smsp__sass_thread_inst_executed / ' +
      'smsp__sass_inst_executed; 32.0 is a full warp, fewer is divergence). sectors: global memory ' +
      'sectors per ideal (smsp__sass_sectors_mem_global / smsp__sass_sectors_mem_global_ideal; 1.0x is ' +
      'coalesced, more is uncoalesced). Each column is shown where its two metrics were counted.');
    d.windows.forEach(function (w) { renderSassWindow(body, w); });
    if (d.left_out > 0) note(body, fmtCount(d.left_out) + ' more windows with SASS metrics are not ' +
      'listed (flare report --format json has them all).');
  }

  /* ---- triggered replays ---- */

  /* The PM section's data of window (pid, id), or null: its samples are
   * drawn there and, for a triggered replay, again beside it. */
  function pmWindowData(pid, id) {
    if (pmWindowData.windows === undefined) {
      var block = document.getElementById('data-pm');
      try { pmWindowData.windows = block ? JSON.parse(block.textContent).windows || [] : []; }
      catch (e) { pmWindowData.windows = []; }
    }
    var found = null;
    pmWindowData.windows.forEach(function (w) { if (w.pid === pid && w.id === id) found = w; });
    return found;
  }

  function renderTriggeredWindow(column, r) {
    var w = r.window;
    add(column, el('h4', '', 'PM window'));
    if (!w) {
      empty(column, 'No PM window was open when the rule fired or while its replay ran.');
      return;
    }
    note(column, 'Window ' + w.id + ' (' + w.opened_by + '), opened ' + fmtSeconds(w.open_s) + ', ' +
      (w.length_ms === null ? 'never closed' : fmtDuration(w.length_ms * 1e6) + ' long') + '; ' +
      fmtCount(w.samples) + ' samples, engine ' + (w.engine_status || '-') +
      '. Shaded: from the firing to the replay\'s metrics stored.');
    var data = pmWindowData(w.pid, w.id);
    var drawn = data && data.drawn ? data.metrics.filter(function (m) { return m.t.length; }).slice(0, 2) : [];
    if (!drawn.length) {
      empty(column, data && data.sample_rows ? 'Its samples are not drawn on this page (see the PM section).' :
        'No PM samples were recorded in this window.');
      return;
    }
    drawn.forEach(function (m, i) {
      timeChart(column, {
        title: m.label, sub: m.metric, xs: m.t,
        series: [{ label: m.label, values: m.v, color: GAUGE_COLORS[i % GAUGE_COLORS.length],
          fill: 'rgba(47,111,223,0.08)' }],
        fmt: unitFormat(m.unit), range: m.unit === 'percent' ? [0, 100] : undefined, xScale: 1e-3,
        sync: 'triggered-' + r.pid + '-' + r.id, height: 100, xRange: [0, data.length_ms],
        spans: [{ start: w.fired_ms, end: Math.max(w.done_ms, w.fired_ms), kind: 'window' }]
      });
    });
  }

  function renderTriggered(body, d) {
    if (!d.replays.length) {
      empty(body, 'No rule asked for a replay in this session (a --deep-when rule ending in ' +
        'action replay or action range NAME).');
      return;
    }
    note(body, 'Each replay a rule asked for: the rule firing, the replayed launch\'s throughputs ' +
      'against their peaks, and the PM window open when it fired or while the replay ran.');
    d.replays.forEach(function (r) {
      var card = add(body, el('div', 'kernel-card triggered'));
      add(card, el('h3', '', 'Replay ' + r.id + ' of pid ' + r.pid + ': rule ' + r.rule_id + ', ' +
        (r.action === 'range' ? 'range ' : '') + (r.target || '(no kernel)')));
      var grid = add(card, el('div', 'triggered-grid'));
      var fired = add(grid, el('div', 'triggered-col'));
      add(fired, el('h4', '', 'The rule fired'));
      var list = add(fired, el('dl', 'facts'));
      fact(list, 'rule', r.rule_text);
      fact(list, 'at', fmtSeconds(r.fired_s));
      fact(list, 'reading', r.metric + ' was ' + r.reading + ' (' + r.comparison + ' ' + r.threshold + ')');
      fact(list, 'chose', r.action === 'range' ? 'the next occurrence of ' + r.target : r.target + ': ' + r.why);
      var outcome = fact(list, 'outcome', r.status + (r.reason ? ': ' + r.reason : '') +
        (r.stored_ms !== null ? '; metrics stored ' + fmtDuration(r.stored_ms * 1e6) + ' after the firing' : ''));
      if (r.status !== 'replayed') outcome.className = 'declined';
      var sol = add(grid, el('div', 'triggered-col'));
      add(sol, el('h4', '', 'Speed of light'));
      if (r.bars.length) solBars(sol, r.bars);
      else if (r.action === 'range' && r.launch_found)
        note(sol, fmtCount(r.span_kernels) + ' kernels measured: span ' + r.launch_id + ' under Replay.');
      else empty(sol, r.status === 'replayed' ? 'No throughput among the launch\'s metrics.' : 'Nothing was replayed.');
      renderTriggeredWindow(add(grid, el('div', 'triggered-col')), r);
    });
    if (d.left_out > 0) note(body, fmtCount(d.left_out) + ' more are not listed (flare report --format json has ' +
      'them all, as does SELECT * FROM triggered_replays).');
  }

  /* ---- drops and warnings ---- */

  function renderDrops(body, d) {
    add(body, el('h3', '', 'Data quality'));
    if (!d.notes.length) empty(body, 'Nothing to note.');
    d.notes.forEach(function (text) {
      var p = add(body, el('p', 'note'));
      add(p, pill('note', 'warning'));
      add(p, document.createTextNode(' ' + text));
    });
    add(body, el('h3', '', 'Dropped data'));
    if (!d.drops.length) {
      empty(body, 'None: every event was recorded.');
    } else {
      var num = [false, false, true, true];
      var rows = table(body, ['source', 'detail', 'count', 'pid'], num);
      d.drops.forEach(function (x) { row(rows, [x.source, x.detail, fmtCount(x.count), x.pid], num); });
    }
    add(body, el('h3', '', 'Warnings and errors'));
    if (!d.warnings.length) {
      empty(body, 'None in flare\'s log.');
      return;
    }
    var rows2 = table(body, ['time', 'pid', 'level', 'message'], [true, true, false, false]);
    d.warnings.forEach(function (x) {
      row(rows2, ['+' + fmtSeconds(x.time_s), x.pid, pill(x.level, x.level), x.message], [true, true, false, false]);
    });
    collapse(rows2, 20, 'warnings and errors');
    if (d.warnings_total > d.warnings.length)
      note(body, fmtCount(d.warnings_total - d.warnings.length) + ' more are in flare.log.');
  }

  /* ---- the page ---- */

  var renderers = {
    session: renderSession, timeline: renderTimeline, kernels: renderKernels, scopes: renderScopes,
    pm: renderPm, pc: renderPc, sass: renderSass, triggered: renderTriggered, replay: renderReplay, drops: renderDrops
  };

  function renderSection(section, only) {
    var id = section.id;
    var body = section.querySelector('.section-body');
    var block = document.getElementById('data-' + id);
    if (only && id !== only) {
      section.style.display = 'none';
      return;
    }
    try {
      var d = JSON.parse(block.textContent);
      if (d.error) {
        add(body, el('p', 'section-error', 'This section could not be read whole: ' + d.error));
        fail('section ' + id + ' could not be read whole');
      }
      renderers[id](body, d);
    } catch (e) {
      add(body, el('p', 'section-error', 'This section could not be drawn: ' + e.message));
      fail('section ' + id + ': ' + e.message);
    }
  }

  function main() {
    var only = null;
    var match = /[?&]section=([a-z]+)/.exec(window.location.search);
    var sections = Array.prototype.slice.call(document.querySelectorAll('section.report-section'));
    if (match && document.getElementById(match[1])) {
      only = match[1];
      document.body.classList.add('single-section');
    }
    var nav = document.getElementById('page-nav');
    sections.forEach(function (section) {
      var link = add(nav, el('a', '', section.querySelector('h2').textContent));
      link.setAttribute('href', '#' + section.id);
    });
    if (typeof uPlot === 'undefined') fail('the chart library did not load');
    status('Drawing…', false);
    sections.forEach(function (section) {
      if (typeof uPlot === 'undefined' && section.id !== 'session') return;
      renderSection(section, only);
    });
    finish();
    /* Charts draw in a microtask; one that never does is an error. */
    window.setTimeout(function () { finish(true); }, 10000);
  }

  try {
    main();
  } catch (e) {
    fail(e.message);
    finish(true);
  }
})();
