#!/usr/bin/env python3
"""Include cycles between the modules of a source tree.

    python3 scripts/include_cycles.py [-I DIR]... DIR

A module is a header and the source file of the same name (src/pg/x.hpp and src/pg/x.cpp):
x depends on y when either file of x includes y's header ("y.hpp", with quotes).  Includes
are found beside the including file, then in each -I directory (the Makefile's -Isrc/core),
then from DIR's parent (a path such as "pg/state.hpp").  Prints each cycle, one line each
("a -> b -> a"), and exits 1 if there is any; prints nothing and exits 0 otherwise.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main(argv):
    dirs, roots = [], []
    args = iter(argv)
    for a in args:
        if a == "-I":
            dirs.append(next(args))
        elif a.startswith("-I"):
            dirs.append(a[2:])
        else:
            roots.append(a)
    files = []
    for r in roots:
        for d, _, names in os.walk(r):
            files += [os.path.normpath(os.path.join(d, n)) for n in names if n.endswith((".cpp", ".hpp", ".h"))]
    known = set(files)

    def module(path):
        return os.path.splitext(path)[0]

    graph = {module(f): set() for f in files}
    for f in files:
        text = open(f, encoding="utf-8").read()
        for inc in INCLUDE.findall(text):
            bases = [os.path.dirname(f)] + dirs + [os.path.dirname(os.path.normpath(r)) for r in roots]
            for b in bases:
                target = os.path.normpath(os.path.join(b, inc))
                if target in known:
                    if module(target) != module(f):
                        graph[module(f)].add(module(target))
                    break

    # Tarjan's strongly connected components: a component of more than one module is a cycle.
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)

    for comp in comps:
        # one shortest cycle through the component's first module, for the message
        start = comp[0]
        prev, queue, seen = {start: None}, [start], {start}
        path = None
        while queue and path is None:
            v = queue.pop(0)
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    path = list(reversed(path)) + [start]
                    break
                if w in comp and w not in seen:
                    seen.add(w)
                    prev[w] = v
                    queue.append(w)
        print(" -> ".join(path) + f"   (a cycle among {len(comp)} modules: {', '.join(comp)})")
    return 1 if comps else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
