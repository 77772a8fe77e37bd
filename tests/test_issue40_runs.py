"""Nothing lost, nothing absurd (issue 40): a run's files are the user's, one writer per run
folder, a resume overwrites no one else's checkpoint, and every moment can be interrupted.

The faults are real: processes started with ``python -m attnbook``, real signals
(``os.kill``) at many delays and at named moments (the test-only hook
``ATTNBOOK_TEST_PAUSE_AT``, :func:`attnbook._signals.phase`), a real second process for the
lock, SIGKILL for a stale lock. ``ATTNBOOK_TEST_SWEEP=full`` runs a longer sweep of delays;
the default one is small (each process pays for importing torch).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from attnbook import _signals
from attnbook.cli import main
from attnbook.runs.folder import LOCK_FILE, RunLock, RunLockedError, foreign_entries
from attnbook.runs.report import report_complete
from attnbook.train import load_checkpoint

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SMALL = [
    "--task",
    "copy",
    "--n-train",
    "200",
    "--n-val",
    "20",
    "--n-test",
    "20",
    "--min-len",
    "2",
    "--max-len",
    "5",
    "--n-symbols",
    "5",
    "--batch-size",
    "16",
    "--eval-every",
    "10",
    "--log-every",
    "5",
    "--quiet",
    "--d-model",
    "16",
    "--heads",
    "2",
    "--d-ff",
    "32",
    "--threads",
    "1",
    "--device",
    "cpu",
]
STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}
WORDS = {signal.SIGINT: "(SIGINT)", signal.SIGTERM: "(SIGTERM)"}


def cli(argv, capsys):
    """main(argv) in this process -> (exit status, stdout, stderr)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str, *words: str) -> str:
    """The one line a command said on stderr (a resume's notice aside)."""
    lines = [
        line
        for line in err.strip().splitlines()
        if not line.startswith(("resuming ", "finishing ", "attnbook-test-phase"))
    ]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "recursion" not in err, err
    for word in words:
        assert word in lines[0], (word, err)
    return lines[0]


def _env(**extra):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **extra)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    env.pop("ATTNBOOK_DEBUG", None)
    return env


class Command:
    """``python -m attnbook ARGV`` in a process of its own, its stderr read as it comes."""

    def __init__(self, argv, pause: str = "none", **env):
        self.lines: list[str] = []
        self._seen = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "attnbook", *map(str, argv)],
            env=_env(ATTNBOOK_TEST_PAUSE_AT=pause, **env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            # a shell that starts the tests in the background leaves SIGINT ignored
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stderr:
            with self._seen:
                self.lines.append(line)
                self._seen.notify_all()

    def wait_for(self, phase: str, timeout: float = 90) -> None:
        marker = f"attnbook-test-phase {phase}\n"
        with self._seen:
            ok = self._seen.wait_for(
                lambda: marker in self.lines or self.proc.poll() is not None, timeout
            )
        assert ok and marker in self.lines, (phase, self.lines)

    def finish(self, timeout: float = 90) -> tuple[int, str]:
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        return code, "".join(self.lines)


def train_argv(out, *more, steps=30):
    return ["train", *SMALL, "--steps", str(steps), "--out", str(out), *more]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A finished 20-step run (never modified)."""
    out = tmp_path_factory.mktemp("i40") / "run"
    assert main(train_argv(out, steps=20)) == 0
    return out


@pytest.fixture
def run_copy(base, tmp_path):
    return Path(shutil.copytree(base, tmp_path / "run"))


def assert_resumable(out: Path, code: int, total: int, capsys) -> None:
    """After a command stopped by a signal: a checkpoint --resume (without --steps) finishes,
    or nothing left behind."""
    ckpt = out / "checkpoint.pt"
    assert not list(out.glob(".*.tmp-*")) if out.exists() else True
    assert not (out / LOCK_FILE).exists()
    if not ckpt.exists():
        assert not out.exists() or foreign_entries(out) == []
        assert not out.exists() or not any(out.iterdir()), list(out.iterdir())
        return
    step = load_checkpoint(ckpt)["step"]
    if code == 0:
        assert report_complete(out, step)
        return
    metrics = json.loads((out / "metrics.json").read_text()) if step == total else None
    if metrics is not None:  # stopped after the last step: the stop is on record
        assert metrics["interrupted"] in ("SIGINT", "SIGTERM", "KeyboardInterrupt"), metrics
    code, _, err = cli(["train", "--resume", ckpt], capsys)
    assert code == 0, err
    assert load_checkpoint(ckpt)["step"] == total
    assert report_complete(out, total)
    assert json.loads((out / "metrics.json").read_text())["test_exact_match"] is not None


# --------------------------------------------------------------------------------------------
# 1. every moment can be interrupted
# --------------------------------------------------------------------------------------------

DELAYS = (0.0, 0.05, 0.25, 0.3, 0.6, 1.2, 2.0, 3.0)
if os.environ.get("ATTNBOOK_TEST_SWEEP") != "full":
    DELAYS = (0.0, 0.25, 0.6, 2.0)


@pytest.mark.parametrize("i, delay", list(enumerate(DELAYS)))
def test_a_signal_at_any_delay_ends_in_one_line_and_a_resumable_run(i, delay, tmp_path, capsys):
    """Delays from the moment the package's first import guards the signals (the imports of
    torch take the first second or more): the sweep that found Ctrl-C ignored at 0.25 s and
    'maximum recursion depth exceeded' at 0.3 s."""
    sig = (signal.SIGINT, signal.SIGTERM)[i % 2]
    out = tmp_path / "run"
    command = Command(train_argv(out))
    command.wait_for("imports")
    time.sleep(delay)
    command.proc.send_signal(sig)
    code, err = command.finish()
    assert code in (STATUS[sig], 0), err
    if code:
        one_line(err, WORDS[sig])
    assert_resumable(out, code, 30, capsys)


@pytest.mark.parametrize(
    "phase, sig",
    [
        ("command", signal.SIGTERM),  # imports done, nothing read
        ("locked", signal.SIGINT),  # the folder locked, nothing built
        ("fit", signal.SIGTERM),  # all built, before the first step
        ("final", signal.SIGTERM),  # after the last step: its evaluation and checkpoint
        ("test", signal.SIGINT),  # the test split's evaluation
        ("write:loss.png", signal.SIGTERM),
        ("write:metrics.json", signal.SIGINT),
        ("done", signal.SIGTERM),  # everything written, the lock not released yet
    ],
)
def test_a_signal_at_each_moment_of_a_run(phase, sig, tmp_path, capsys):
    out = tmp_path / "run"
    command = Command(train_argv(out), pause=phase)
    command.wait_for(phase)
    command.proc.send_signal(sig)
    code, err = command.finish()
    assert code == STATUS[sig], err
    line = one_line(err, WORDS[sig])
    if phase in ("final", "test") or phase.startswith("write:") or phase == "done":
        assert "--resume" in line and "finishes the run's report" in line, line
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["interrupted"] == ("SIGINT" if sig == signal.SIGINT else "SIGTERM")
        assert metrics["steps"] == 30
    else:
        assert "nothing was" in line, line
    assert_resumable(out, code, 30, capsys)


def test_a_second_signal_while_the_first_is_handled_corrupts_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    command = Command(train_argv(out), pause="write:metrics.json")
    command.wait_for("write:metrics.json")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM, signal.SIGINT):
        command.proc.send_signal(sig)
        time.sleep(0.02)
    code, err = command.finish()
    assert code == 143, err
    one_line(err, "(SIGTERM)")
    assert_resumable(out, code, 30, capsys)


def test_a_signal_while_a_resume_starts_keeps_its_checkpoint(run_copy, capsys):
    before = (run_copy / "checkpoint.pt").read_bytes()
    command = Command(["train", "--resume", run_copy / "checkpoint.pt", "--steps", 40], "fit")
    command.wait_for("fit")
    command.proc.send_signal(signal.SIGINT)
    code, err = command.finish()
    assert code == 130
    one_line(err, "(SIGINT)", "is as it was", "--resume")
    assert (run_copy / "checkpoint.pt").read_bytes() == before
    assert report_complete(run_copy, 20)  # the finished run's report is untouched


def test_resuming_a_run_stopped_in_its_final_phase_finishes_it(run_copy, capsys):
    """As SIGTERM in the final phase left it on main: metrics.json says nothing of the stop,
    history.csv and the figures missing. --resume without --steps finishes it."""
    for name in ("history.csv", "loss.png", "attention.png"):
        (run_copy / name).unlink()
    assert not report_complete(run_copy, 20)
    code, _, err = cli(["train", "--resume", run_copy / "checkpoint.pt"], capsys)
    assert code == 0, err
    assert "finishing" in err
    assert report_complete(run_copy, 20) and (run_copy / "attention.png").is_file()
    code, _, err = cli(["train", "--resume", run_copy / "checkpoint.pt"], capsys)
    assert code == 1  # now complete: a resume without a longer run is refused, as before
    one_line(err, "the end of its run of 20 steps")


# --------------------------------------------------------------------------------------------
# 2. one writer per run folder; a resume overwrites no one else's checkpoint
# --------------------------------------------------------------------------------------------


def test_a_second_writer_is_refused_and_a_killed_ones_lock_is_taken_over(run_copy, capsys):
    ckpt = run_copy / "checkpoint.pt"
    first = Command(["train", "--resume", ckpt, "--steps", 260], pause="fit")
    first.wait_for("fit")
    pid = first.proc.pid
    code, _, err = cli(["train", "--resume", ckpt, "--steps", 300], capsys)
    assert code == 1
    one_line(err, "in use by", f"pid {pid}", "--steps 260", "since")
    code, _, err = cli(["evaluate", "--checkpoint", ckpt, "--lengths", "3"], capsys)
    assert code == 1
    one_line(err, "in use by", f"pid {pid}")
    code, out, err = cli(["translate", "--checkpoint", ckpt, "abc"], capsys)
    assert code == 0, err  # reading is fine
    first.proc.kill()  # SIGKILL: no clean-up; the lock file stays, naming it
    assert first.finish()[0] == -signal.SIGKILL
    assert (run_copy / LOCK_FILE).exists()
    code, _, err = cli(["train", "--resume", ckpt, "--steps", 25], capsys)
    assert code == 0, err
    assert "took over the lock" in err and f"pid {pid}" in err
    assert load_checkpoint(ckpt)["step"] == 25 and not (run_copy / LOCK_FILE).exists()


def test_a_resume_of_a_checkpoint_changed_since_it_was_read_is_refused(run_copy, capsys):
    """Two resumes of one checkpoint, the second reading it before the first wrote: the
    second does not write over the first's continuation."""
    ckpt, go = run_copy / "checkpoint.pt", run_copy.parent / "go"
    second = Command(
        ["train", "--resume", ckpt, "--steps", 300],
        pause="resolved",
        ATTNBOOK_TEST_PAUSE_UNTIL=str(go),
    )
    second.wait_for("resolved")  # it has read the checkpoint of step 20
    code, _, err = cli(["train", "--resume", ckpt, "--steps", 26], capsys)
    assert code == 0, err
    continued = ckpt.read_bytes()
    go.touch()
    code, err = second.finish()
    assert code == 1
    one_line(err, "changed on disk since this command read it at step 20", "at step 26")
    assert ckpt.read_bytes() == continued


def test_a_checkpoint_written_by_another_process_meanwhile_is_not_written_over(
    tmp_path, base, monkeypatch
):
    """A process that ignored the lock wrote checkpoint.pt during the run: the run's next
    save is refused, and the other file kept."""
    import attnbook.runs.training as training

    out = tmp_path / "run"
    foreign = (base / "checkpoint.pt").read_bytes()
    evaluate = training._RunTrainer.evaluate

    def meddle(self, *args, **kwargs):
        if self.step == 20:
            (out / "intruder.tmp").write_bytes(foreign)
            os.replace(out / "intruder.tmp", out / "checkpoint.pt")
        return evaluate(self, *args, **kwargs)

    monkeypatch.setattr(training._RunTrainer, "evaluate", meddle)
    with pytest.raises(training.CheckpointChangedError, match="changed on disk since this run"):
        training.train_run(
            out,
            task="copy",
            steps=30,
            n_train=200,
            n_val=20,
            n_test=20,
            min_len=2,
            max_len=5,
            n_symbols=5,
            batch_size=16,
            eval_every=10,
            d_model=16,
            heads=2,
            d_ff=32,
            quiet=True,
            device="cpu",
        )
    assert (out / "checkpoint.pt").read_bytes() == foreign
    assert not (out / LOCK_FILE).exists()


def test_the_lock_names_its_holder_and_is_released(tmp_path):
    with RunLock(tmp_path, "python -m attnbook train --out x") as lock:
        holder = json.loads((tmp_path / LOCK_FILE).read_text())
        assert holder["pid"] == os.getpid() and holder["command"].endswith("--out x")
        with pytest.raises(RunLockedError, match=f"pid {os.getpid()} on .*--out x"):
            RunLock(tmp_path).acquire()
        assert lock.held
    assert not (tmp_path / LOCK_FILE).exists()
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": 999999, "host": "h", "command": "c"}))
    lock = RunLock(tmp_path)
    assert "took over the lock" in lock.acquire()  # nobody holds the flock: a dead holder's
    lock.release()


# --------------------------------------------------------------------------------------------
# 3. a run's files are the user's: no output over an input, no folder taken over
# --------------------------------------------------------------------------------------------


def test_an_empty_out_or_a_folder_of_other_files_is_refused(tmp_path, monkeypatch, capsys):
    code, _, err = cli(train_argv(""), capsys)
    assert code == 1
    one_line(err, "--out is an empty string")
    mine = tmp_path / "project"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    (mine / "metrics.json").write_text("{}")  # a name a run writes, but not a run's
    monkeypatch.chdir(mine)
    for more in ([], ["--overwrite"]):
        code, _, err = cli(train_argv(".", *more), capsys)
        assert code == 1
        one_line(err, "(the current folder)", "notes.txt", "not of a run")
    assert sorted(p.name for p in mine.iterdir()) == ["metrics.json", "notes.txt"]
    assert (mine / "metrics.json").read_text() == "{}"


def test_a_resume_into_a_folder_of_other_files_is_refused(run_copy, capsys):
    (run_copy / "mine.txt").write_text("mine")
    code, _, err = cli(["train", "--resume", run_copy / "checkpoint.pt", "--steps", 30], capsys)
    assert code == 1
    one_line(err, "mine.txt", "give a new folder")


def test_train_never_writes_over_its_data(tmp_path, capsys):
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"a {x}\tb {x}\n" for x in "abcdefgh"))
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.json").symlink_to(data)  # a link resolved to the data
    argv = ["train", "--task", "tsv", "--data", data, "--out", out, "--steps", 5, "--quiet"]
    code, _, err = cli([*argv, "--overwrite"], capsys)
    assert code == 1
    one_line(err, "metrics.json", "is --data", "never writes over a file it reads")
    (out / "metrics.json").unlink()
    shutil.copy(data, out / "history.csv")
    code, _, err = cli(
        ["train", "--task", "tsv", "--data", out / "history.csv", "--out", out, "--overwrite"],
        capsys,
    )
    assert code == 1
    one_line(err, "history.csv", "is --data")
    assert (out / "history.csv").read_text() == data.read_text()


def test_evaluate_translate_and_export_never_write_over_their_inputs(run_copy, capsys):
    ckpt = run_copy / "checkpoint.pt"
    (run_copy / "evaluation.json").symlink_to(ckpt)
    code, _, err = cli(["evaluate", "--checkpoint", ckpt, "--lengths", "3"], capsys)
    assert code == 1
    one_line(err, "evaluation.json", "is --checkpoint")
    (run_copy / "evaluation.json").unlink()
    (run_copy / "evaluation.json").write_text("my own notes")
    code, _, err = cli(["evaluate", "--checkpoint", ckpt, "--lengths", "3"], capsys)
    assert code == 1
    one_line(err, "not an evaluation that evaluate wrote")
    assert (run_copy / "evaluation.json").read_text() == "my own notes"
    (run_copy / "evaluation.json").unlink()
    for _ in range(2):  # its own evaluation.json is replaced
        code, _, err = cli(["evaluate", "--checkpoint", ckpt, "--lengths", "3"], capsys)
        assert code == 0, err
    before = ckpt.read_bytes()
    link = run_copy.parent / "att.png"
    link.symlink_to(ckpt)
    # the checkpoint itself is refused first for its suffix (matplotlib writes no .pt), a
    # picture-named link to it for being the checkpoint
    for png, says in ((ckpt, "cannot write .pt"), (link, "is --checkpoint")):
        code, _, err = cli(
            ["translate", "--checkpoint", ckpt, "abc", "--attention-png", png, "--overwrite"],
            capsys,
        )
        assert code == 1
        one_line(err, "--attention-png", says)
    png = run_copy.parent / "mine.png"
    png.write_bytes(b"mine")
    code, _, err = cli(["translate", "--checkpoint", ckpt, "abc", "--attention-png", png], capsys)
    assert code == 1
    one_line(err, "already exists", "--overwrite")
    assert png.read_bytes() == b"mine"
    named = run_copy.parent / "model.json"  # a checkpoint named as export's sidecar
    shutil.copy(ckpt, named)
    code, _, err = cli(
        ["export", "--checkpoint", named, "--out", run_copy.parent / "model.onnx", "--overwrite"],
        capsys,
    )
    assert code == 1
    one_line(err, "sidecar", "is --checkpoint")
    assert ckpt.read_bytes() == before and named.read_bytes() == before


# --------------------------------------------------------------------------------------------
# 4. the guard of the command line's start
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, orig, expected",
    [
        (["-m"], ["python", "-m", "attnbook", "train"], True),
        (["-m"], ["python", "-X", "importtime", "-mattnbook"], True),
        (["-m"], ["python", "-m", "attnbook.pretrained"], False),
        (["-m"], ["python", "-m", "pytest"], False),
        (["/venv/bin/attnbook", "train"], [], True),
        (["C:\\venv\\Scripts\\attnbook.exe"], [], True),
        (["attnbook.py"], [], False),
        (["/usr/bin/ipykernel_launcher.py"], [], False),
    ],
)
def test_the_signals_are_guarded_only_when_started_as_the_command(argv, orig, expected):
    assert _signals.started_as_command(argv, orig) is expected


def test_main_puts_back_the_callers_handlers(tmp_path, capsys):
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    cli(["train", "--out", tmp_path / "x"], capsys)  # (an error: no --task)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
