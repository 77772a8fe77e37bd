"""The command line's texts: its exit statuses (:data:`EXIT_CODES_HELP`) and each command's
examples, shown by ``--help`` (:mod:`attnbook.cli` re-exports them)."""

from __future__ import annotations

from ._limits import SIZES_HELP

__all__ = [
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_DIVERGED",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_CODES_HELP",
    "TRAIN_EXAMPLES",
    "EVALUATE_EXAMPLES",
    "TRANSLATE_EXAMPLES",
    "EXPORT_EXAMPLES",
]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DIVERGED = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143  # 128 + SIGINT, 128 + SIGTERM
EXIT_CODES_HELP = """\
exit status:
  0    done
  1    an error, said in one line on stderr (ATTNBOOK_DEBUG=1 shows the traceback); every
       check runs before the first step, and no saved file is changed by a failed command
  2    bad arguments
  3    training diverged (a NaN or infinite loss or weights): it stopped, and the last good
       checkpoint is kept as it was
  130  interrupted by Ctrl-C (SIGINT), at any moment, in one line; in training, after saving
       a checkpoint that --resume continues from (stopped after the last step, while the
       report was written: --resume without --steps finishes it)
  143  stopped by SIGTERM; likewise
A run folder takes one command at a time: another train or evaluate of it is refused (1),
naming the process that holds it; a lock left by a killed process is taken over.
"""


TRAIN_EXAMPLES = (
    """\
examples:
  %(prog)s --task dates --model transformer --max-seconds 60 --out runs/dates
  %(prog)s --task reverse --model rnn-attention --steps 3000 --hidden 256
  %(prog)s --task tsv --data fra.tsv --model transformer --epochs 10 \\
      --d-model 256 --layers 3 --device cuda
  %(prog)s --resume runs/dates/checkpoint.pt --steps 4000
  torchrun --nproc_per_node=2 -m attnbook train --task dates --batch-size 256

--steps is the total number of updates, those before a --resume included. On --resume the
model, data, seed and length of the run (--steps/--epochs, the schedule's end) come from the
checkpoint; options given again override it, and each change is printed. --device,
--threads, --compile and --quiet are not carried over. An --out that holds a run is refused
unless --overwrite, and so is one that holds anything that is not of a run (a new or
empty folder is fine). Ctrl-C or SIGTERM saves a checkpoint and exits; --resume continues
exactly from it, and finishes a run stopped after its last step. A resume writes the newer
checkpoint over the one it read, and only over that one: one changed on disk since it was
read (another resume) is not written over.

"""
    + SIZES_HELP
    + EXIT_CODES_HELP
)

EVALUATE_EXAMPLES = (
    """\
examples:
  %(prog)s --checkpoint runs/reverse/checkpoint.pt --lengths 5,10,20,40
  %(prog)s --checkpoint runs/dates/checkpoint.pt --beam 4

copy/reverse/sort: --n-per-length fresh inputs of exactly each length (none seen in training;
lengths beyond the training range show how the model extrapolates). dates/tsv: the test split,
grouped by source length: the column "L" holds sources longer than the previous bound and at
most L tokens long. tsv runs also get corpus BLEU and chrF (sacrebleu: pip install
sacrebleu) and the perplexity of the test split. The results are also written to
evaluation.json beside the checkpoint (replacing one that evaluate wrote, never another
file), while holding the run folder's lock: evaluating a run that is training is refused.

"""
    + SIZES_HELP
    + EXIT_CODES_HELP
)

TRANSLATE_EXAMPLES = (
    """\
examples:
  %(prog)s --checkpoint runs/dates/checkpoint.pt "Wednesday 9 May 2018"
  %(prog)s --checkpoint runs/dates/checkpoint.pt "9.5.2018" \\
      --attention-png attention.png --beam 4

"""
    + SIZES_HELP
    + EXIT_CODES_HELP
)


EXPORT_EXAMPLES = (
    """\
examples:
  %(prog)s --checkpoint runs/dates/checkpoint.pt --out site/dates.onnx

"""
    + EXIT_CODES_HELP
)
