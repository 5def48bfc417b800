#!/usr/bin/env python3
"""perfetto_check.py: a validator of Chrome trace-event JSON as `flare export
--format perfetto` writes it, for the tests (standard library only).

    perfetto_check.py TRACE [--gz TRACE.gz] [--db SESSION.db] [--expect WHAT,...]

TRACE is the plain JSON; --gz a gzip export of the same session, which must
decompress to the same document. Checked on every event:

* its phase is one flare writes (M, X, C, s, f, i) and its pid an integer;
* X: numeric ts and dur >= 0, an integer tid; on each track the slices nest
  (a slice that starts inside another ends inside it too), as Perfetto
  requires of slices on one track;
* i: numeric ts, scope "t", an integer tid;
* s and f ("ac2g" flows): each s has exactly one f with the same id and cat,
  and each f one s; the f is not before its s; the f binds to the
  enclosing slice ("bp": "e"), and a slice on the f's track starts at its ts
  and one on the s's track encloses the s;
* C: args with numbers only;
* M: cat "__metadata", a known name; every track group with events and
  every thread with events is named and has a sort index;
* "ts" comes before any array among an event's top-level members (Perfetto's
  JSON tokenizer gives up on such an event);
* the file has no displayTimeUnit (Perfetto of 2020-2022 read "ns" there as
  the unit of ts) and says otherData.time_unit "us".

--db reads the session with sqlite3 and checks that every API call whose
GPU work began after it has an arrow to each such kernel, copy or memset,
and that the trace has one slice per call, kernel, copy and scope.
--expect names content that must be there: calls, flows, pm, counters,
windows, rules, storms, replay, unrecorded-window, still-open, sass (a
window slice summarising SASS metrics; with --db, every window with
sass_metrics rows has one, its sass_rows the window's rows and its
sass_totals each device's sum of each metric).

Exits 0 when every check holds, 1 with the first failure on stdout.
"""
import argparse
import gzip
import json
import sqlite3
import sys
from collections import defaultdict
from decimal import Decimal

PHASES = {'M', 'X', 'C', 's', 'f', 'i'}
METADATA = {'process_name', 'thread_name', 'process_sort_index', 'thread_sort_index'}


def fail(message):
    print('perfetto check failed:', message)
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


def ordered_pairs(pairs):
    """object_pairs_hook: keeps the members' order (checked for "ts")."""
    return dict(pairs) | {'__order__': [key for key, _ in pairs]}


def strip_order(value):
    if isinstance(value, dict):
        return {k: strip_order(v) for k, v in value.items() if k != '__order__'}
    if isinstance(value, list):
        return [strip_order(v) for v in value]
    return value


def load(path, opener):
    with opener(path, 'rt', encoding='utf-8', errors='strict') as f:
        return json.load(f, parse_float=Decimal, object_pairs_hook=ordered_pairs)


def is_number(value):
    return isinstance(value, (int, Decimal)) and not isinstance(value, bool)


def check_ts_order(e):
    order = e['__order__']
    if 'ts' not in order:
        return
    for key in order[:order.index('ts')]:
        expect(not isinstance(e[key], list), 'array %r before "ts" in %r' % (key, e))


def check_nesting(slices):
    """Slices of one track must nest: sorted by start (longest first), each
    starts at or after its parent's start and ends at or before its end."""
    for track, items in slices.items():
        items.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, event in items:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack:
                expect(end <= stack[-1][1],
                       'slices overlap without nesting on track %r: %r and %r' %
                       (track, stack[-1][2], event))
            stack.append((start, end, event))


def check_trace(doc):
    expect(isinstance(doc, dict), 'the trace is not a JSON object')
    expect('displayTimeUnit' not in doc,
           'displayTimeUnit is set: Perfetto of 2020-2022 reads "ns" there as the unit of ts')
    other = doc.get('otherData')
    expect(isinstance(other, dict) and other.get('time_unit') == 'us',
           'otherData.time_unit is not "us"')
    events = doc.get('traceEvents')
    expect(isinstance(events, list), 'traceEvents is not a list')
    processes, threads, process_sort, thread_sort = {}, {}, set(), set()
    used_pids, used_tracks = set(), set()
    slices = defaultdict(list)
    starts, finishes = defaultdict(list), defaultdict(list)
    for e in events:
        expect(isinstance(e, dict), 'an event is not an object: %r' % (e,))
        ph = e.get('ph')
        expect(ph in PHASES, 'unknown phase in %r' % e)
        expect(isinstance(e.get('pid'), int) and 0 <= e['pid'] < 2**32, 'pid in %r' % e)
        check_ts_order(e)
        if ph in ('X', 'i', 's', 'f'):
            expect(isinstance(e.get('tid'), int) and 0 <= e['tid'] < 2**32, 'tid in %r' % e)
            expect(is_number(e.get('ts')), 'ts in %r' % e)
            used_tracks.add((e['pid'], e['tid']))
        if ph != 'M':
            used_pids.add(e['pid'])
            expect(isinstance(e.get('name'), str), 'event without a name: %r' % e)
        if ph == 'M':
            expect(e.get('cat') == '__metadata', 'metadata without cat __metadata: %r' % e)
            expect(e.get('name') in METADATA, 'unknown metadata %r' % e)
            args = e.get('args', {})
            if e['name'] == 'process_name':
                expect(isinstance(args.get('name'), str), 'process_name without a name %r' % e)
                expect(e['pid'] not in processes, 'process named twice: %r' % e)
                processes[e['pid']] = args['name']
            elif e['name'] == 'thread_name':
                key = (e['pid'], e['tid'])
                expect(isinstance(args.get('name'), str), 'thread_name without a name %r' % e)
                expect(key not in threads, 'thread named twice: %r' % e)
                threads[key] = args['name']
            elif e['name'] == 'process_sort_index':
                expect(isinstance(args.get('sort_index'), int), 'sort index %r' % e)
                process_sort.add(e['pid'])
            else:
                expect(isinstance(args.get('sort_index'), int), 'sort index %r' % e)
                thread_sort.add((e['pid'], e['tid']))
        elif ph == 'X':
            expect(is_number(e.get('dur')) and e['dur'] >= 0, 'dur in %r' % e)
            expect(isinstance(e.get('cat'), str), 'X without cat: %r' % e)
            args = e.get('args', {})
            expect(not ('replay' in args and args.get('replay_rerun')),
                   'a replay re-run carries a launch\'s results: %r' % e)
            slices[(e['pid'], e['tid'])].append((e['ts'], e['ts'] + e['dur'], e))
        elif ph == 'i':
            expect(e.get('s') == 't', 'instant not on its thread: %r' % e)
        elif ph == 'C':
            expect(is_number(e.get('ts')), 'C event without ts: %r' % e)
            args = strip_order(e.get('args'))
            expect(isinstance(args, dict) and args, 'C event without args: %r' % e)
            for key, value in args.items():
                expect(is_number(value), 'C event with a non-number %r: %r' % (key, e))
        else:
            expect(isinstance(e.get('id'), int), 'flow without a numeric id: %r' % e)
            expect(e.get('cat') == 'ac2g' and e.get('name') == 'ac2g', 'flow kind: %r' % e)
            (starts if ph == 's' else finishes)[(e['id'], e['cat'])].append(e)
            if ph == 'f':
                expect(e.get('bp') == 'e', 'flow end not bound to its enclosing slice: %r' % e)
    for pid in used_pids:
        expect(pid in processes, 'events in an unnamed process %d' % pid)
    for key in used_tracks:
        expect(key in threads, 'events on an unnamed thread %r' % (key,))
    for pid in processes:
        expect(pid in process_sort, 'process %d has no process_sort_index' % pid)
    for key in threads:
        expect(key in thread_sort, 'thread %r has no thread_sort_index' % (key,))
    for key, items in starts.items():
        expect(len(items) == 1, 'flow id %r starts %d times' % (key, len(items)))
        expect(len(finishes.get(key, [])) == 1,
               'flow %r has %d ends' % (key, len(finishes.get(key, []))))
        expect(finishes[key][0]['ts'] >= items[0]['ts'], 'flow %r ends before it starts' % (key,))
    for key in finishes:
        expect(key in starts, 'flow %r ends without a start' % (key,))
    # Each flow end binds: a slice on its track starts at its ts; its start
    # lies inside a slice of its track.
    begins = {track: {s[0] for s in items} for track, items in slices.items()}
    for key, (s,) in starts.items():
        f = finishes[key][0]
        expect(f['ts'] in begins.get((f['pid'], f['tid']), ()),
               'flow end %r has no slice beginning at it' % f)
        track = slices.get((s['pid'], s['tid']), [])
        expect(any(a <= s['ts'] <= b for a, b, _ in track), 'flow start %r is in no slice' % s)
    check_nesting(slices)
    return events, processes, threads, starts, finishes


def check_database(path, events, finishes):
    db = sqlite3.connect('file:%s?mode=ro' % path, uri=True)
    db.text_factory = lambda b: b.decode('utf-8', 'replace')
    origin = db.execute('SELECT start_ns FROM session').fetchone()[0]

    def count(sql):
        return db.execute(sql).fetchone()[0]

    def us(ns):
        return Decimal(ns - origin) / 1000

    xs = [e for e in events if e['ph'] == 'X']
    by_cat = defaultdict(int)
    for e in xs:
        by_cat[e['cat']] += 1
    expect(by_cat['kernel'] == count('SELECT count(*) FROM kernels'), 'kernel slices')
    expect(by_cat['gpu_memcpy'] + by_cat['gpu_memset'] == count('SELECT count(*) FROM copies'),
           'copy and memset slices')
    expect(by_cat['scope'] == count('SELECT count(*) FROM scopes'), 'scope slices')
    has_calls = count("SELECT count(*) FROM sqlite_schema WHERE name = 'api_calls'")
    if not has_calls:
        return
    expect(by_cat['cuda_driver'] == count('SELECT count(*) FROM api_calls'), 'API call slices')
    # Every (call, GPU work) pair with the work after the call: one arrow from
    # the call's start on its thread to the work's start.
    wanted = defaultdict(int)
    for row in db.execute(
            'SELECT a.pid, a.thread_id, a.start_ns, g.start_ns FROM api_calls a JOIN'
            ' (SELECT pid, correlation_id, start_ns FROM kernels UNION ALL'
            '  SELECT pid, correlation_id, start_ns FROM copies) g'
            ' ON g.pid = a.pid AND g.correlation_id = a.correlation_id'
            ' WHERE g.start_ns >= a.start_ns'):
        wanted[(row[0], row[1], us(row[2]), us(row[3]))] += 1
    got = defaultdict(int)
    starts = {}
    for e in events:
        if e['ph'] == 's':
            starts[e['id']] = e
    for (flow_id, _), (f,) in finishes.items():
        s = starts[flow_id]
        got[(s['pid'], s['tid'], s['ts'], f['ts'])] += 1
    expect(got == wanted, 'arrows: %d pairs, expected %d (first missing: %r)' %
           (sum(got.values()), sum(wanted.values()),
            next((k for k in wanted if got.get(k) != wanted[k]), None)))
    calls_with_work = count(
        'SELECT count(*) FROM api_calls a WHERE EXISTS (SELECT 1 FROM kernels k WHERE'
        ' k.pid = a.pid AND k.correlation_id = a.correlation_id AND k.start_ns >= a.start_ns)'
        ' OR EXISTS (SELECT 1 FROM copies c WHERE c.pid = a.pid AND'
        ' c.correlation_id = a.correlation_id AND c.start_ns >= a.start_ns)')
    calls_with_arrows = len({(k[0], k[1], k[2]) for k in got})
    expect(calls_with_arrows >= calls_with_work,
           '%d calls with GPU work but %d with arrows' % (calls_with_work, calls_with_arrows))


def parse_sass_totals(text):
    """'device D: METRIC V, METRIC V; device E: ...' -> {(D, METRIC): V}.
    A summary cut at its bound (639 bytes) loses its last, maybe cut, pair;
    'N more metrics' is not a pair."""
    totals = {}
    cut = len(text.encode('utf-8')) >= 639
    parts = text.split('; ')
    for index, part in enumerate(parts):
        last = cut and index == len(parts) - 1
        if last and ': ' not in part:
            break
        expect(part.startswith('device '), 'sass_totals part %r' % part)
        head, _, body = part.partition(': ')
        device = int(head[len('device '):])
        pairs = body.split(', ')
        for k, pair in enumerate(pairs):
            if last and k == len(pairs) - 1:
                break
            if pair.endswith(' more metrics'):
                continue
            metric, _, value = pair.rpartition(' ')
            totals[(device, metric)] = int(value)
    return totals


def check_sass(events, db_path):
    slices = [e for e in events if e['ph'] == 'X' and e.get('cat') == 'flare_window'
              and 'sass_rows' in e.get('args', {})]
    expect(slices, 'expected a window slice with SASS metrics (sass_rows), found none')
    for e in slices:
        args = e['args']
        for key in ('sass_totals', 'sass_hottest'):
            expect(isinstance(args.get(key), str) and args[key].startswith('device '),
                   'a SASS window slice without %s: %r' % (key, e))
    if db_path is None:
        return
    db = sqlite3.connect('file:%s?mode=ro' % db_path, uri=True)
    by_window = {(e['pid'], e['args']['window_id']): e['args'] for e in slices}
    for pid, window_id, rows in db.execute(
            'SELECT s.pid, s.window_id, COUNT(*) FROM sass_metrics s JOIN windows w'
            ' ON w.pid = s.pid AND w.id = s.window_id WHERE w.opened_ns IS NOT NULL'
            ' GROUP BY s.pid, s.window_id'):
        args = by_window.get((pid, window_id))
        expect(args is not None, 'window %d of %d has SASS metrics but no summary' %
               (window_id, pid))
        expect(args['sass_rows'] == rows, 'window %d: sass_rows %r, the table has %d' %
               (window_id, args['sass_rows'], rows))
        wanted = {(d, m): v for d, m, v in db.execute(
            'SELECT device, metric, SUM(value) FROM sass_metrics WHERE pid = ? AND window_id = ?'
            ' GROUP BY device, metric', (pid, window_id))}
        got = parse_sass_totals(args['sass_totals'])
        expect(got and all(wanted.get(k) == v for k, v in got.items()),
               'window %d: sass_totals %r, the table says %r' % (window_id, got, wanted))


def check_expected(what, events, starts, db_path=None):
    def any_event(predicate):
        return any(predicate(e) for e in events)

    checks = {
        'calls': lambda: any_event(lambda e: e['ph'] == 'X' and e['cat'] == 'cuda_driver'),
        'flows': lambda: len(starts) > 0,
        'counters': lambda: any_event(lambda e: e['ph'] == 'C' and e['name'].startswith('counter ')),
        'windows': lambda: any_event(lambda e: e.get('cat') == 'flare_window' and e['ph'] == 'X'),
        'rules': lambda: any_event(lambda e: e['ph'] == 'i' and e.get('cat') == 'flare_rule'),
        'storms': lambda: any_event(lambda e: e['ph'] == 'X' and e.get('cat') == 'flare_storm'),
        'replay': lambda: any_event(
            lambda e: e['ph'] == 'X' and ('replay' in e.get('args', {}) or
                                          e.get('cat') == 'flare_replay')),
        'unrecorded-window': lambda: any_event(
            lambda e: e.get('cat') == 'flare_window' and e['args'].get('still_open') is True),
        'still-open': lambda: any_event(
            lambda e: e['ph'] == 'X' and e.get('args', {}).get('still_open') is True),
    }
    for name in what:
        if name == 'sass':
            check_sass(events, db_path)
            continue
        if name == 'pm':
            tracks = defaultdict(list)
            for e in events:
                if e['ph'] == 'C' and e['name'].startswith('pm '):
                    tracks[(e['pid'], e['name'])].append(e)
            expect(tracks, 'no PM counter track')
            for key, items in tracks.items():
                items.sort(key=lambda e: e['ts'])
                expect(items[-1]['args']['value'] == 0,
                       'PM track %r does not end at 0 after its window' % (key,))
                expect(any(e['args']['value'] != 0 for e in items), 'PM track %r is all 0' % (key,))
            continue
        expect(name in checks, 'unknown --expect %r' % name)
        expect(checks[name](), 'expected %s in the trace, found none' % name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('trace')
    parser.add_argument('--gz')
    parser.add_argument('--db')
    parser.add_argument('--expect', default='')
    options = parser.parse_args()
    doc = load(options.trace, open)
    if options.gz:
        with open(options.gz, 'rb') as f:
            expect(f.read(2) == b'\x1f\x8b', '%s is not gzip' % options.gz)
        expect(strip_order(load(options.gz, gzip.open)) == strip_order(doc),
               '%s does not decompress to the same trace' % options.gz)
    events, _, _, starts, finishes = check_trace(doc)
    events = strip_order(events)
    if options.db:
        check_database(options.db, events, finishes)
    check_expected([w for w in options.expect.split(',') if w], events, starts, options.db)
    print('perfetto check: %d events, %d flows: ok' % (len(events), len(starts)))


if __name__ == '__main__':
    main()
