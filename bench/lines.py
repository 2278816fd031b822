"""Lines of compare/'s Python at a git revision: every line (wc -l) and code lines only.

    python bench/lines.py [REV ...]            # default: HEAD
    python bench/lines.py --log A..B           # each commit's change to both counts, and its subject

A code line holds a token that is not a comment, a docstring or a line break; blank lines,
comment lines and docstring lines are left out. Issue 33 asks for "fewer lines in compare/ for
the same behaviour": both counts are printed, so that a change that only folds or deletes comments
shows as what it is.
"""
import io
import subprocess
import sys
import tokenize


def _git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def code_lines(source):
    """The numbers of the lines that hold code (not a comment, docstring or blank)."""
    lines = set()
    prev = tokenize.INDENT
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = tok.type
        if kind in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                    tokenize.DEDENT, tokenize.ENDMARKER):
            if kind not in (tokenize.NL, tokenize.COMMENT):
                prev = kind
            continue
        if kind == tokenize.STRING and prev in (tokenize.INDENT, tokenize.NEWLINE,
                                                tokenize.DEDENT):
            prev = kind  # a string standing as a statement: a docstring
            continue
        prev = kind
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines


def _sizes(rev, names):
    """(lines, code lines) of each of the named files at rev; a file absent there counts 0."""
    present = set(_git("ls-tree", "-r", "--name-only", rev, "compare").split())
    sizes = {}
    for name in names:
        text = _git("show", "%s:%s" % (rev, name)) if name in present else ""
        sizes[name] = (text.count("\n"), len(code_lines(text)))
    return sizes


def count(rev):
    files = [f for f in _git("ls-tree", "-r", "--name-only", rev, "compare").split()
             if f.endswith(".py")]
    sizes = _sizes(rev, files).values()
    return len(files), sum(t for t, _ in sizes), sum(c for _, c in sizes)


def log(span):
    """Each commit of span (first parents, merges as one change) with its change to both counts."""
    for line in _git("log", "--reverse", "--first-parent", "--format=%h %s", span).splitlines():
        rev, subject = line.split(" ", 1)
        names = _git("diff", "--no-renames", "--name-only", rev + "^", rev, "--", "compare")
        changed = [f for f in names.split() if f.endswith(".py")]
        if not changed:
            continue
        before, after = _sizes(rev + "^", changed), _sizes(rev, changed)
        total = sum(after[f][0] - before[f][0] for f in changed)
        code = sum(after[f][1] - before[f][1] for f in changed)
        print("%+5d %+5d  %s  %s" % (total, code, rev, subject[:100]))


def main(argv):
    if argv[:1] == ["--log"] and len(argv) == 2:
        return log(argv[1])
    for rev in argv or ["HEAD"]:
        files, total, code = count(rev)
        short = _git("rev-parse", "--short", rev).strip()
        print("%s  %d files  %d lines  %d code lines" % (short, files, total, code))


if __name__ == "__main__":
    main(sys.argv[1:])
