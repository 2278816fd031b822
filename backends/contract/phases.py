"""Where a run's time goes: the named moments of one run (Unix times in every result's `phases`),
and the variables through which the host and the backend tell each other about them.

Standard library only, Python >= 3.8. The executor puts the moment it launched the backend in
COMPARE_LAUNCHED_AT; `process_started` is when the backend's interpreter first ran our code (this
module is imported at once by every entry point: so interpreter start-up, and any launcher in
between such as torchrun or horovodrun, fall before it); the backend marks the moments only it can
see (framework imported, devices ready), and the harness marks the rest. The host adds
`cell_start` and `cell_end` around the whole cell, so that everything between is accounted for:

    cell_start -> launched -> process_started -> framework_imported -> devices_ready
    [-> batch_searched] -> model_built -> first_step_done -> warmup_done -> timed_start
    -> timed_end -> cell_end

`first_step_done` includes what the first step costs beyond a normal one (compilation, cuDNN or
XLA autotuning, lazy allocations). `batch_searched` ends a batch search run in the cell's own
process (backends/batchprobe.py: its probes' own marks are forgotten). Under a multi-process
launcher the result holds rank 0's marks.
"""
ORDER = ("cell_start", "launched", "process_started", "framework_imported", "devices_ready",
         "batch_searched", "model_built", "first_step_done", "warmup_done", "timed_start",
         "timed_end", "cell_end")
OPTIONAL = ("batch_searched",)  # only a cell that searches its batch in its own process has it
LAUNCHED_ENV = "COMPARE_LAUNCHED_AT"
FILE_ENV = "COMPARE_PHASE_FILE"  # where set: each mark is also appended there, as it happens
PHASE_FILE = "phase"  # its name in a cell's work folder (the local executor's choice)
