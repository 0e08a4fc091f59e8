#!/usr/bin/env python3
"""Checks the archive `make dist` wrote: one cosid-VERSION.zip whose files are exactly the
committed ones under cosid-VERSION/, with what PGXN needs, and no build products.
Usage: check_dist.py DIR NUMBER_OF_COMMITTED_FILES VERSION"""
import glob, sys, zipfile

directory, committed, version = sys.argv[1], int(sys.argv[2]), sys.argv[3]
zips = glob.glob(directory + '/cosid-*.zip')
names = zipfile.ZipFile(zips[0]).namelist() if len(zips) == 1 else []
top = 'cosid-' + version
files = [n for n in names if not n.endswith('/')]
need = ['META.json', 'cosid.control', 'Makefile', 'README.md', 'docs/reference.md', 'src/pg/pg.hpp']
checks = [
    (len(zips) == 1 and zips[0].endswith('/%s.zip' % top), 'make dist wrote %s.zip' % top),
    (all(n.startswith(top + '/') for n in names), 'every file is under %s/' % top),
    (all(top + '/' + n in names for n in need), 'it holds META.json, cosid.control, Makefile, README.md, docs/ and the sources'),
    (len(files) == committed, 'it holds the %d committed files (%d)' % (committed, len(files))),
    (not any(n.endswith(('.o', '.so', '.zip')) for n in names), 'no build products'),
]
for ok, what in checks:
    print(('ok - ' if ok else 'not ok - ') + what)
sys.exit(0 if all(ok for ok, _ in checks) else 1)
