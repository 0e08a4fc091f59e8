#!/usr/bin/env python3
"""Checks META.json against the PGXN meta spec 1.0.0 (https://pgxn.org/meta/spec.txt): the
required keys and their types, semantic versions, the license names the spec knows,
provides/prereqs/resources structure; and that it agrees with cosid.control and the files.
Usage: check_meta.py META.json [cosid.control]. Prints "ok - ..." / "not ok - ..." lines."""
import json, os, re, sys

SEMVER = re.compile(r'^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+)?$')
LICENSES = {'agpl_3', 'apache_1_1', 'apache_2_0', 'artistic_1', 'artistic_2', 'bsd', 'freebsd', 'gfdl_1_2',
            'gfdl_1_3', 'gpl_1', 'gpl_2', 'gpl_3', 'lgpl_2_1', 'lgpl_3_0', 'mit', 'mozilla_1_0', 'mozilla_1_1',
            'openssl', 'perl_5', 'postgresql', 'qpl_1_0', 'ssleay', 'sun', 'zlib', 'open_source', 'restricted',
            'unrestricted', 'unknown'}
PHASES = {'configure', 'build', 'test', 'runtime', 'develop'}
RELATIONS = {'requires', 'recommends', 'suggests', 'conflicts'}
failures = []

def check(cond, what):
    print(('ok - ' if cond else 'not ok - ') + what)
    if not cond:
        failures.append(what)

path = sys.argv[1]
root = os.path.dirname(os.path.abspath(path))
try:
    meta = json.load(open(path))
except ValueError as e:
    check(False, 'META.json is JSON: %s' % e)
    sys.exit(1)
check(isinstance(meta, dict), 'META.json is an object')
for key, kind in [('name', str), ('abstract', str), ('version', str), ('maintainer', (str, list)),
                  ('license', (str, list, dict)), ('provides', dict), ('meta-spec', dict)]:
    check(isinstance(meta.get(key), kind), 'required key %r is present with the right type' % key)
check(re.match(r'^[A-Za-z0-9][A-Za-z0-9._-]*$', meta.get('name', '')) is not None, 'name is a valid distribution name')
check(SEMVER.match(meta.get('version', '')) is not None, 'version %r is a semantic version' % meta.get('version'))
check(meta.get('meta-spec', {}).get('version') == '1.0.0', 'meta-spec version is 1.0.0')
lic = meta.get('license')
names = [lic] if isinstance(lic, str) else (lic if isinstance(lic, list) else list(lic.keys()) if isinstance(lic, dict) else [])
check(all(n in LICENSES for n in names) and names, 'license %r is one the spec knows' % (lic,))
for ext, p in meta.get('provides', {}).items():
    check(isinstance(p, dict) and isinstance(p.get('file'), str) and isinstance(p.get('version'), str),
          'provides %s has a file and a version' % ext)
    check(SEMVER.match(p.get('version', '')) is not None, 'provides %s version is a semantic version' % ext)
    check(os.path.exists(os.path.join(root, p.get('file', ''))), 'provides %s file %s exists' % (ext, p.get('file')))
    if 'docfile' in p:
        check(os.path.exists(os.path.join(root, p['docfile'])), 'provides %s docfile exists' % ext)
for phase, rels in meta.get('prereqs', {}).items():
    check(phase in PHASES and isinstance(rels, dict), 'prereqs phase %r is known' % phase)
    for rel, reqs in (rels or {}).items():
        check(rel in RELATIONS and isinstance(reqs, dict), 'prereqs %s relation %r is known' % (phase, rel))
        for name, ver in (reqs or {}).items():
            check(ver == 0 or ver == '0' or SEMVER.match(str(ver)) is not None, 'prereq %s %s is a version' % (name, ver))
if 'release_status' in meta:
    check(meta['release_status'] in ('stable', 'testing', 'unstable'), 'release_status is stable, testing or unstable')
for key in ('tags', 'no_index', 'resources'):
    if key in meta:
        check(isinstance(meta[key], (list, dict)), '%s has the right type' % key)
if len(sys.argv) > 2:
    control = open(sys.argv[2]).read()
    m = re.search(r"default_version\s*=\s*'([^']+)'", control)
    default = m.group(1) if m else None
    pv = meta.get('provides', {}).get('cosid', {}).get('version', '')
    check(default is not None and pv.startswith(default + '.'),
          'provides cosid version %s matches default_version %s in cosid.control' % (pv, default))
    # One install script (the base) and a chain of update scripts from it to default_version,
    # each step once: CREATE EXTENSION runs them in turn.
    sql = os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), 'sql')
    names = os.listdir(sql) if os.path.isdir(sql) else []
    # (the version being developed: built from sql/updates/X--Y.sql and sql/functions/)
    names += ['cosid--' + n for n in os.listdir(os.path.join(sql, 'updates'))] \
        if os.path.isdir(os.path.join(sql, 'updates')) else []
    bases = sorted(m.group(1) for m in (re.match(r'^cosid--([^-]+)\.sql$', n) for n in names) if m)
    steps = dict(m.groups() for m in (re.match(r'^cosid--([^-]+)--([^-]+)\.sql$', n) for n in names) if m)
    v, seen = (bases[0] if len(bases) == 1 else None), set()
    while v is not None and v != default and v in steps and v not in seen:
        seen.add(v); v = steps[v]
    check(len(bases) == 1 and v == default,
          'sql/ holds one install script (%s) and update scripts from it to default_version %s' % (', '.join(bases), default))
    check(len(bases) == 1 and meta.get('provides', {}).get('cosid', {}).get('file') == 'sql/cosid--%s.sql' % bases[0],
          'provides cosid file is the install script')
sys.exit(1 if failures else 0)
