#!/usr/bin/env python3
"""Checks contrib/grafana/cosid.json against the exporter's series.

Usage: check_grafana.py DASHBOARD QUERIES_YAML [METRICS]
  DASHBOARD     contrib/grafana/cosid.json
  QUERIES_YAML  contrib/prometheus/cosid_queries.yaml: the series it declares (query name +
                column, LABEL columns as labels)
  METRICS       optional: a scrape of the real prometheus-postgres-exporter run with that file
                (test/e2e/prometheus.sh): the series and labels it really emits
Prints "ok - ..." / "not ok - ..." lines; exits 1 on a failure.  Checked: the JSON is a
dashboard (panels with unique ids, a Prometheus query in each), every cosid_* series a query
names is declared (and, with METRICS, emitted), every label a query groups or filters by is
one of that series (or Prometheus' instance/job), and every declared series is on the
dashboard."""
import json, re, sys

PROMETHEUS_LABELS = {'instance', 'job'}


def declared_series(path):
    """{series: {labels}} from the exporter's query file (its own format, read without YAML)."""
    series, query, labels, columns = {}, None, set(), []

    def flush():
        for c in columns:
            series['%s_%s' % (query, c)] = set(labels) | {'server'}

    for line in open(path, encoding='utf-8'):
        m = re.match(r'^([A-Za-z_]\w*):\s*$', line)
        if m:
            if query:
                flush()
            query, labels, columns = m.group(1), set(), []
            continue
        m = re.match(r'^\s+-\s+(\w+):\s*\{\s*usage:\s*"(\w+)"', line)
        if m and query:
            (labels.add if m.group(2) == 'LABEL' else columns.append)(m.group(1))
    if query:
        flush()
    return series


def scraped_series(path):
    """{series: {labels}} of a /metrics scrape."""
    series = {}
    for line in open(path, encoding='utf-8'):
        m = re.match(r'^([A-Za-z_:][\w:]*)(\{([^}]*)\})?\s', line)
        if not m or line.startswith('#'):
            continue
        labels = set(re.findall(r'(\w+)="', m.group(3) or ''))
        series.setdefault(m.group(1), set()).update(labels)
    return series


def queries(dashboard):
    """[(panel title, expr)] of every panel, rows' nested panels included."""
    out = []
    for p in dashboard.get('panels', []):
        for q in [p] + p.get('panels', []):
            for t in q.get('targets', []):
                out.append((q.get('title', '?'), t.get('expr', '')))
    return out


def check(dashboard_path, queries_path, metrics_path=None):
    results = []
    try:
        dashboard = json.load(open(dashboard_path, encoding='utf-8'))
    except (OSError, ValueError) as e:
        return [(False, 'the dashboard is JSON (%s)' % e)]
    panels = [p for p in dashboard.get('panels', []) if p.get('type') != 'row']
    ids = [p.get('id') for p in dashboard.get('panels', [])]
    exprs = queries(dashboard)
    results.append((bool(panels) and len(ids) == len(set(ids)) and all(p.get('targets') for p in panels)
                    and all(e for _, e in exprs),
                    'the dashboard has %d panels with unique ids, each with a Prometheus query' % len(panels)))
    declared = declared_series(queries_path)
    known = declared
    if metrics_path:
        emitted = {k: v for k, v in scraped_series(metrics_path).items() if k.startswith('cosid_')}
        results.append((set(emitted) == set(declared),
                        'the exporter emits the %d cosid series the query file declares%s' % (
                            len(declared), ''.join('\n#   declared, not emitted: ' + s for s in sorted(set(declared) - set(emitted)))
                            + ''.join('\n#   emitted, not declared: ' + s for s in sorted(set(emitted) - set(declared))))))
        known = emitted
    used, unknown, bad_labels = set(), [], []
    for title, expr in exprs:
        names = set(re.findall(r'\b(cosid_\w+)', expr))
        used |= names
        unknown += ['%s: %s' % (title, n) for n in sorted(names - set(known))]
        labels = set()
        for group in re.findall(r'\b(?:by|without)\s*\(([^)]*)\)', expr):
            labels |= {l.strip() for l in group.split(',') if l.strip()}
        for selector in re.findall(r'\{([^}]*)\}', expr):
            labels |= set(re.findall(r'(\w+)\s*[=!]~?', selector))
        for label in sorted(labels - PROMETHEUS_LABELS):
            if not any(label in known.get(n, set()) for n in names):
                bad_labels.append('%s: label %s on %s' % (title, label, ', '.join(sorted(names))))
    source = 'the exporter emits' if metrics_path else 'the query file declares'
    results.append((exprs and not unknown, 'every series the dashboard uses (%d) is one %s%s'
                    % (len(used), source, ''.join('\n#   ' + u for u in unknown))))
    results.append((not bad_labels, 'every label the dashboard groups or filters by is on its series%s'
                    % ''.join('\n#   ' + b for b in bad_labels)))
    missing = sorted(set(known) - used)
    results.append((not missing, 'every series %s is on the dashboard%s'
                    % (source, ''.join('\n#   missing: ' + m for m in missing))))
    return results


if __name__ == '__main__':
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    results = check(*sys.argv[1:])
    for ok, what in results:
        print(('ok - ' if ok else 'not ok - ') + what)
    sys.exit(0 if all(ok for ok, _ in results) else 1)
