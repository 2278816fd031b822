"""Who holds the GIL: py-spy's raw (collapsed) samples of `py-spy record --gil --threads
--subprocesses --format raw` summed per process and thread, then the frames each busiest thread
holds it in (issue 36: what keeps JAX's decode thread waiting for the GIL).

    python bench/gil_share.py gil.txt [--frames 6] [--rate 200] [--within TEXT]

Each raw line is `frame;frame;...;frame COUNT`; with --subprocesses the first frame names the
process, with --threads the next one names the thread. Only samples of a thread that held the GIL
are in the file (--gil), so a thread's share is its share of the GIL-held time that was sampled;
seconds are samples / --rate (py-spy's). --within TEXT keeps the stacks with a frame holding TEXT
(`--within harness.py:` the harness's part, `--within compare-` compare's named threads).
"""
import argparse
import collections
import re
import sys


def parse(lines):
    """[(process, thread, frames, count)] from raw lines."""
    out = []
    for line in lines:
        line = line.rstrip("\n")
        match = re.match(r"^(.*) (\d+)$", line)
        if not match:
            continue
        stack, count = match.group(1), int(match.group(2))
        process = "process ?"
        head = re.match(r'^(process \d+:".*?");(?=thread \()', stack)  # its command line may
        if head:                                                       # hold ';'
            process, stack = head.group(1), stack[head.end():]
        frames = stack.split(";")
        thread = frames.pop(0) if frames and frames[0].startswith("thread ") else "thread ?"
        out.append((process[:90], thread[:60], frames, count))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("raw")
    p.add_argument("--frames", type=int, default=6, help="leaf frames shown per thread")
    p.add_argument("--rate", type=float, default=200.0, help="py-spy's samples a second")
    p.add_argument("--within", default="", help="only stacks with a frame (or thread) holding this")
    a = p.parse_args(argv)
    with open(a.raw, errors="replace") as f:
        samples = [s for s in parse(f) if a.within in s[1] or any(a.within in x for x in s[2])]
    total = sum(s[3] for s in samples) or 1
    by_thread = collections.Counter()
    for process, thread, _, count in samples:
        by_thread[(process, thread)] += count
    print("GIL-held samples: {} ({:.2f} s)".format(total, total / a.rate))
    for (process, thread), count in by_thread.most_common(12):
        print("{:6.1%}  {:7.2f} s  {}  {}".format(count / total, count / a.rate, thread, process))
    for (process, thread), count in by_thread.most_common(4):
        leaves = collections.Counter()
        for pr, th, frames, n in samples:
            if (pr, th) == (process, thread) and frames:
                leaves[frames[-1][:110]] += n
        print("-- {} of {} ({:.1%}):".format(thread, process[:50], count / total))
        for frame, n in leaves.most_common(a.frames):
            print("   {:6.1%}  {}".format(n / count, frame))
    return 0


if __name__ == "__main__":
    sys.exit(main())
