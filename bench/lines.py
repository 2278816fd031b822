"""Lines of compare/'s Python at a git revision: every line (wc -l) and code lines only.

    python bench/lines.py [REV ...]        # default: HEAD

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


def count(rev):
    files = [f for f in _git("ls-tree", "-r", "--name-only", rev, "compare").split()
             if f.endswith(".py")]
    total = code = 0
    for name in files:
        text = _git("show", "%s:%s" % (rev, name))
        total += text.count("\n")
        code += len(code_lines(text))
    return len(files), total, code


def main(argv):
    for rev in argv or ["HEAD"]:
        files, total, code = count(rev)
        short = _git("rev-parse", "--short", rev).strip()
        print("%s  %d files  %d lines  %d code lines" % (short, files, total, code))


if __name__ == "__main__":
    main(sys.argv[1:])
