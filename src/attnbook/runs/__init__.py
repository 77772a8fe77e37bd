"""Training runs with a run folder, for Python and notebooks as for the command line.

``python -m attnbook train`` (:mod:`attnbook.cli`) parses its arguments and calls
:func:`train_run`; a notebook calls it directly and gets the same guarantees: a folder that
already holds a run is refused unless ``overwrite=True``, ``resume=".../checkpoint.pt"``
continues a run exactly where it stopped, and every file is written atomically::

    from attnbook.runs import train_run

    run = train_run("runs/dates", task="dates", model="transformer", steps=2000)
    run.metrics["exact_match"], run.trainer.history[-1]
    run = train_run(resume="runs/dates/checkpoint.pt", steps=4000)  # 2000 steps more

The modules:

- :mod:`attnbook.runs.options`: the run's options, their defaults (:data:`TRAIN_DEFAULTS`),
  and how a run resolves them (defaults <- the checkpoint's <- those given);
- :mod:`attnbook.runs.folder`: the run folder, checked, prepared and written atomically;
- :mod:`attnbook.runs.tasks`: the task from the options, and a TSV run's data file;
- :mod:`attnbook.runs.models`: the model from the options, or from a checkpoint;
- :mod:`attnbook.runs.report`: ``metrics.json``, ``history.csv`` and the figures;
- :mod:`attnbook.runs.training`: :func:`train_run` and the :class:`Run` it returns;
- :mod:`attnbook.runs.evaluation`: :func:`evaluate_run` (exact match by input length) and
  :func:`translate_run` (a run's model on your inputs), :func:`export_run` (as ONNX).
"""

from .evaluation import evaluate_run, export_run, translate_run
from .folder import RUN_FILES
from .models import MODELS, build_model, model_from_checkpoint
from .options import TRAIN_DEFAULTS, TrainCommandOptions
from .training import Run, train_run

__all__ = [
    "train_run",
    "Run",
    "evaluate_run",
    "translate_run",
    "export_run",
    "RUN_FILES",
    "TRAIN_DEFAULTS",
    "TrainCommandOptions",
    "MODELS",
    "build_model",
    "model_from_checkpoint",
]
