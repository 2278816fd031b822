"""The Slurm cluster through its own commands (sinfo, sbatch, scontrol, scancel, squeue), and the
job script a run becomes. No accounting needed: a job's state is read from `scontrol show job`
while the controller keeps it (MinJobAge), then from the exit code file the job leaves behind.
"""
import math
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from backends.contract.rules import EXIT_GRACE_ENV, EXIT_GRACE_S

from .. import envs, files

# states after which a job does nothing more (anything else: it is queued, running or ending)
ENDED = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL",
         "DEADLINE", "PREEMPTED", "SPECIAL_EXIT", "REVOKED")
EXIT_CODE_FILE = "exit_code"  # written by the job script after srun returns
TASKS_DIR = "tasks"  # one file per srun task: "<task> <node> <hostname>"
NODES_FILE = "nodes"  # the job's nodes, one per line, in Slurm's order
# seconds srun lets the other tasks run once one has exited 0 (--wait): the job script reads
# EXIT_GRACE_ENV (contract/rules.py, the processes launcher's too) where the submitting environment
# sets it (sbatch passes that on), so a test cuts the grace short; unset, EXIT_GRACE_S. 0 is srun's
# "for ever"; a value srun would refuse is refused before the job is submitted (slurm.py)


class SlurmError(Exception):
    """A Slurm command failed; the message is its own."""


def call(cmd: Sequence[str], timeout: float = 30, stdin: Optional[str] = None) -> str:
    """Run a Slurm command; its stdout, or SlurmError with its stderr's last line."""
    try:
        proc = subprocess.run(list(cmd), input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SlurmError("{} did not answer within {:.0f} s".format(cmd[0], timeout)) from None
    except OSError as exc:
        raise SlurmError("could not run {}: {}".format(cmd[0], exc.strerror or exc)) from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        raise SlurmError(lines[-1] if lines else "{} exited {}".format(cmd[0], proc.returncode))
    return proc.stdout


def partitions() -> List[Dict[str, str]]:
    """One row per partition and node state: name, availability, node count and list, CPUs and
    memory per node, generic resources (GPUs), state."""
    keys = ("partition", "avail", "nodes", "cpus", "memory_mb", "gres", "state", "nodelist")
    out = call(["sinfo", "-h", "-o", "%P|%a|%D|%c|%m|%G|%T|%N"], timeout=10)
    return [dict(zip(keys, line.split("|"))) for line in out.splitlines() if line.count("|") == 7]


def describe_partition(row: Dict[str, str]) -> str:
    """'partition debug* (up): 2 nodes nodeA,nodeB, 2 CPUs and 9.8 GiB each, GPUs: none, idle'."""
    try:
        mem = "{:.1f} GiB".format(int(row["memory_mb"].rstrip("+")) / 1024)
    except ValueError:
        mem = row["memory_mb"] + " MB"
    gres = row["gres"] if row["gres"] not in ("(null)", "") else "none"
    return "partition {} ({}): {} node{} {}, {} CPUs and {} each, GPUs: {}, {}".format(
        row["partition"], row["avail"], row["nodes"], "" if row["nodes"] == "1" else "s",
        row["nodelist"], row["cpus"], mem, gres, row["state"])


def job_info(job_id: str) -> Optional[Dict[str, str]]:
    """`scontrol show job` as a dict (JobState, ExitCode, NodeList, ...); None once the controller
    has forgotten the job."""
    try:
        out = call(["scontrol", "-o", "show", "job", job_id], timeout=30)
    except SlurmError as exc:
        if "invalid job id" in str(exc).lower():
            return None
        raise
    return dict(re.findall(r"(\w[\w/:]*)=(\S*)", out))


def state_of(info: Dict[str, str]) -> str:
    return info.get("JobState", "UNKNOWN")


def exit_code(info: Dict[str, str]) -> Optional[int]:
    """ExitCode=CODE:SIGNAL -> CODE, or -SIGNAL for a job ended by a signal."""
    code, _, signal = info.get("ExitCode", "").partition(":")
    try:
        return -int(signal) if signal and int(signal) else int(code)
    except ValueError:
        return None


def hostnames(nodelist: str) -> List[str]:
    """'node[1-3]' -> ['node1', 'node2', 'node3'] as Slurm expands it."""
    if not nodelist or nodelist == "(null)":
        return []
    return call(["scontrol", "show", "hostnames", nodelist]).split()


def queued(job_ids: Sequence[str]) -> List[str]:
    """Those of job_ids (one or more) squeue still lists (queued, running or ending)."""
    out = call(["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)])
    return [line.strip() for line in out.splitlines() if line.strip() in set(job_ids)]


def has_pyxis() -> bool:
    """Whether srun runs containers through pyxis (`srun --container-image`)."""
    try:
        return "--container-image" in call(["srun", "--help"], timeout=10)
    except SlurmError:
        return False


def enroot_uri(image: str) -> str:
    """nvcr.io/nvidia/pytorch:24.03-py3 -> nvcr.io#nvidia/pytorch:24.03-py3 (pyxis names a
    registry with '#'); a local path or an already written URI is kept."""
    first, slash, rest = image.partition("/")
    if "#" in image or image.startswith(("/", ".")) or not slash or not ("." in first or ":" in first):
        return image
    return first + "#" + rest


def container_mounts(campaign_root: str, data: List[Any]) -> str:
    """pyxis's --container-mounts: the campaign read-write (results, logs), a real-data run's
    folder and prepared side read-only, each at its own path (SRC:DST[:FLAGS])."""
    return "--container-mounts=" + ",".join(
        ["{0}:{0}".format(campaign_root)] +
        ["{}:{}{}".format(m.host, m.container, ":ro" if m.read_only else "") for m in data])


def gpu_count(gres: str) -> int:
    """'gpu:a100:4(S:0-1),nic:1' -> 4 (the GPUs per node a partition's nodes have)."""
    counts = [int(m) for m in re.findall(r"gpu(?::[\w.-]+)?:(\d+)", gres)]
    return max(counts or [0])


JOB_SCRIPT = """#!/bin/bash
# compare: run {run_id} as one Slurm job (written by compare/executors/slurm.py, run by sbatch)
# the job started now: the cell's "launch" span (backends/phases.py) holds the queue wait
export COMPARE_LAUNCHED_AT=$(date +%s.%N)
cd {work}
# every node's address as Slurm knows it (NodeAddr: node names need not resolve), in node order
scontrol show hostnames "$SLURM_JOB_NODELIST" > {nodes_file}
addrs=$(while read -r node; do
    addr=$(scontrol -o show node "$node" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
    echo "${{addr:-$node}}"
done < {nodes_file} | paste -sd, -)
export COMPARE_NODE_ADDRS=$addrs COMPARE_COORDINATOR_ADDR=${{addrs%%,*}}
# a port of this job's own, so two jobs sharing a node never meet (nor two cells running side by
# side as steps of one allocation: each has an offset of its own)
export COMPARE_COORDINATOR_PORT=$((20000 + (SLURM_JOB_ID + ${{COMPARE_PORT_OFFSET:-0}}) % 20000))
export MASTER_ADDR=$COMPARE_COORDINATOR_ADDR MASTER_PORT=$COMPARE_COORDINATOR_PORT
export COMPARE_COORDINATOR=$COMPARE_COORDINATOR_ADDR:$COMPARE_COORDINATOR_PORT
{exports}
# a job's tasks share its node's cores; a step's, the cores the step was given (COMPARE_STEP_CPUS)
cpus=$((${{COMPARE_STEP_CPUS:-${{SLURM_CPUS_ON_NODE:-1}}}} / {tasks}))
mkdir -p {tasks_dir}
# one task failing ends the others at once; one exiting 0 while others run (a rank's own check
# ended it, a divergence leaving its peer in a collective) ends them after a grace
srun --kill-on-bad-exit=1 --wait=${{{grace_env}:-{grace}}} --distribution=block --nodes={nodes} \\
    --ntasks-per-node={tasks} --ntasks={total} --cpus-per-task=$((cpus > 0 ? cpus : 1)) {srun_args}\\
    bash {work}/task.sh {command}
rc=$?
echo $rc > {exit_file}.tmp && mv {exit_file}.tmp {exit_file}
exit $rc
"""

# each task reads its rank, local rank and the task counts from Slurm's own variables
# (backends/world.py), the rendezvous from the job's COMPARE_COORDINATOR_* and MASTER_*
TASK_SCRIPT = """#!/bin/bash
# one srun task of {run_id}: note where it runs, then start the backend
echo "$SLURM_PROCID ${{SLURMD_NODENAME:-?}} $(hostname)" > {tasks_dir}/$SLURM_PROCID
exec "$@"
"""


def write_job(work: Path, run_id: str, nodes: int, tasks: int, command: Sequence[str],
              env: Dict[str, Optional[str]], srun_args: Sequence[str]) -> Path:
    """Write job.sh (sbatch runs it once, on the first node) and task.sh (srun runs it once per
    task) into the run's work folder; return job.sh. env: variables to export (None: unset)."""
    q = shlex.quote
    exports = "\n".join("export {}={}".format(k, q(v)) if v is not None else "unset {}".format(k)
                        for k, v in sorted(env.items()))
    job = JOB_SCRIPT.format(
        run_id=run_id, work=q(str(work)), nodes_file=NODES_FILE, exports=exports, tasks=tasks,
        tasks_dir=q(str(work / TASKS_DIR)), nodes=nodes, total=nodes * tasks,
        srun_args="".join(q(a) + " " for a in srun_args), command=" ".join(q(c) for c in command),
        exit_file=EXIT_CODE_FILE, grace_env=EXIT_GRACE_ENV, grace=math.ceil(EXIT_GRACE_S))
    task = TASK_SCRIPT.format(run_id=run_id, tasks_dir=q(str(work / TASKS_DIR)))
    files.write_text(work / "task.sh", task, work)
    files.write_text(work / "job.sh", job, work)
    return work / "job.sh"


def submit(args: Sequence[str], script: Path) -> str:
    """sbatch the script; its job id."""
    out = call(["sbatch", "--parsable"] + list(args) + [str(script)], timeout=60)
    return out.strip().split(";")[0]


def tasks_seen(work: Path) -> List[Tuple[int, str, str]]:
    """(task, node, hostname) of every srun task that started, from the files they wrote."""
    found = [path.read_text().split() for path in (work / TASKS_DIR).glob("*")]
    return sorted((int(p[0]), p[1], p[2]) for p in found if len(p) == 3 and p[0].isdigit())


def read_exit_code(work: Path) -> Optional[int]:
    try:
        return int((work / EXIT_CODE_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


# run on a compute node as `bash -c PYTHON_CHECK check PROBE (PYTHON "MODULE ...")...`: each
# interpreter asked with the probe (compare/envs.py) as a run starts it there (no PYTHONPATH, from
# /), bounded by `timeout` (its words in no locale's quotes); what it said (stdout and stderr)
# between "== " lines, with its exit code
PYTHON_CHECK = ('code=$1; shift; echo "== node ${{SLURMD_NODENAME:-$(hostname)}}"; '
                'while [ $# -gt 1 ]; do echo "== python"; '
                '(cd / && env -u PYTHONPATH LC_ALL=C timeout {seconds} "$1" -c "$code" $2 2>&1); '
                'echo "== exit $?"; shift 2; done')


def ask_pythons(asked: Sequence[Tuple[str, Sequence[str]]], probe: str, seconds: float,
                placement: Sequence[str], queued: float) -> Tuple[str, List[Tuple[int, str]]]:
    """(the node, [(exit code, what it said)] of each (python, modules) in order): one one-task
    job (srun) of PYTHON_CHECK, each python given `seconds`, the job `queued` to start and end;
    SlurmError where it does not answer so."""
    args = [probe]
    for python, modules in asked:
        args += [python, " ".join(modules)]
    out = call(["srun", "--nodes=1", "--ntasks=1", "--job-name=compare-python-check", "--time=5"] +
               list(placement) + ["bash", "-c", PYTHON_CHECK.format(seconds=math.ceil(seconds)),
                                  "check"] + args, timeout=queued)
    node, answers, said = "?", [], []  # type: Tuple[str, List[Tuple[int, str]], List[str]]
    for line in out.splitlines():
        if line.startswith("== node "):
            node = line[len("== node "):]
        elif line == "== python":
            said = []
        elif line.startswith("== exit ") and line[len("== exit "):].isdigit():
            answers.append((int(line[len("== exit "):]), "\n".join(said)))
        else:
            said.append(line)
    if len(answers) != len(asked):
        raise SlurmError("the check of --python on a node was cut short: {}".format(
            (out.strip().splitlines() or ["nothing said"])[-1]))
    return node, answers


def answered(code: int, said: str) -> envs.Answer:
    """envs.probe()'s answer from an interpreter's exit code and words on a node (timeout: 124)."""
    if code == 124:
        raise envs.EnvError("no answer within {} s".format(envs.PROBE_TIMEOUT))
    return envs.read_probe(code, said, "")
