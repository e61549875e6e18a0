"""Benchmark tasks: JevBench records or the project's own decision format, as decision requests.

A task is one labelled question about one state, with its options in a declared
order. Two record formats are read, one JSON object per line:

* JevBench (docs/glossary.md#jevbench): ``{id, family, state, question: {type, instructions,
  criteria}, labels, expected, split, group, provenance}`` with ``type``

  - ``choice``: ``criteria`` maps option id -> description (or null: the id is the text);
  - ``noul``: yes/no; options ``no``, ``yes`` in label order; ``criteria`` may hold
    ``{"true": ..., "false": ...}`` descriptions; ``expected`` is ``yes``/``no`` (or a bool);
  - ``score``: ``criteria`` is an ordered list of 2-10 level texts; options ``"0".."k-1"``;
    ``expected`` is the level number.

* the decision format of this project: a decision request (``id, state, question,
  options``) plus ``expected`` and optionally ``family``, ``type``, ``split``, ``group``.

Options keep the order of ``labels`` (JevBench) or of ``options`` (decision format);
a benchmark may present them in another order (``permutation``) to test position bias.
Everything here is pure: reading, checking and building request bodies.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import WorkshopError

if TYPE_CHECKING:
    from importlib.abc import Traversable

TYPES = ("choice", "noul", "score")
ORDERS = ("original", "reversed", "rotated")
MIN_OPTIONS, MAX_OPTIONS = 2, 16


class TaskFormatError(WorkshopError, ValueError):
    """A task record that cannot be turned into a decision (the message names the line and field)."""


def default_tasks_path() -> Traversable:
    """The task set shipped with the package (``workshop_lib/evaluation/data/tasks.jsonl``)."""
    return resources.files("workshop_lib.evaluation") / "data" / "tasks.jsonl"


@dataclass(frozen=True)
class Task:
    id: str
    family: str
    type: str
    state: Any
    question: str
    options: tuple[tuple[str, str], ...]  # (option id, text shown to the model), declared order
    expected: str
    split: str = "test"
    group: str | None = None
    provenance: Any = field(default=None, compare=False)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(oid for oid, _ in self.options)

    def presented(self, order: str | Sequence[int] = "original") -> list[tuple[str, str]]:
        """The options in the order they are sent: a named order or an explicit permutation."""
        perm = permutation(order, len(self.options)) if isinstance(order, str) else tuple(order)
        if sorted(perm) != list(range(len(self.options))):
            raise ValueError(f"{perm} is not a permutation of {len(self.options)} options")
        return [self.options[i] for i in perm]

    def request(
        self,
        order: str | Sequence[int] = "original",
        *,
        request_id: str | None = None,
        temperature: float | None = None,
    ) -> dict[str, Any]:
        """A decision request body (``client.decide``) with the options in ``order``."""
        body: dict[str, Any] = {
            "id": request_id or self.id,
            "state": self.state,
            "question": self.question,
            "options": [{"id": oid, "text": text} for oid, text in self.presented(order)],
        }
        if temperature is not None:
            body["temperature"] = temperature
        return body

    def question_body(self, question_id: str, order: str | Sequence[int] = "original") -> dict[str, Any]:
        """One question of a shared-state request (``client.decide_batch``) about this task's state."""
        return {
            "id": question_id,
            "question": self.question,
            "options": [{"id": oid, "text": text} for oid, text in self.presented(order)],
        }

    def to_record(self) -> dict[str, Any]:
        """The task as a JevBench record (what ``task_from_record`` reads back)."""
        if self.type == "noul":
            texts = dict(self.options)
            criteria: Any = {
                key: texts[label][len(label) + 2 :]
                for label, key in (("no", "false"), ("yes", "true"))
                if texts[label] != label
            } or None
        elif self.type == "score":
            criteria = [text for _, text in self.options]
        else:
            criteria = {oid: text for oid, text in self.options}
        question = {"type": self.type, "instructions": self.question}
        if criteria is not None:
            question["criteria"] = criteria
        expected: Any = int(self.expected) if self.type == "score" else self.expected
        return {
            "id": self.id,
            "family": self.family,
            "state": self.state,
            "question": question,
            "labels": list(self.labels),
            "expected": expected,
            "split": self.split,
            "group": self.group,
            "provenance": self.provenance,
        }


def permutation(order: str, n: int) -> tuple[int, ...]:
    """Indices of a named presentation order: ``original``, ``reversed``, ``rotated`` (first goes last)."""
    if order == "original":
        return tuple(range(n))
    if order == "reversed":
        return tuple(reversed(range(n)))
    if order == "rotated":
        return tuple(list(range(1, n)) + [0])
    raise ValueError(f"unknown option order {order!r}; use one of {', '.join(ORDERS)}")


def rotation(base: Sequence[int], shift: int) -> tuple[int, ...]:
    """``base`` rotated left by ``shift`` positions (a cyclic shift of the presented order)."""
    shift %= len(base)
    return tuple(base[shift:]) + tuple(base[:shift])


# -- reading records --------------------------------------------------------------------


def _fail(where: str, message: str) -> TaskFormatError:
    return TaskFormatError(f"{where}: {message}")


def _text(value: object, where: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"{name} must be a non-empty string")
    return value


def _yes_no(value: object, where: str) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and value.strip().lower() in ("yes", "no", "true", "false"):
        return "yes" if value.strip().lower() in ("yes", "true") else "no"
    raise _fail(where, f"expected of a noul task must be yes/no (or true/false), got {value!r}")


def _check_options(options: list[tuple[str, str]], where: str) -> tuple[tuple[str, str], ...]:
    ids = [oid for oid, _ in options]
    if not MIN_OPTIONS <= len(ids) <= MAX_OPTIONS:
        raise _fail(where, f"{len(ids)} options; a decision takes {MIN_OPTIONS} to {MAX_OPTIONS}")
    if len(set(ids)) != len(ids):
        raise _fail(where, f"duplicate option ids in {ids}")
    return tuple(options)


def _from_jevbench(record: Mapping[str, Any], where: str) -> dict[str, Any]:
    q = record["question"]
    qtype = q.get("type")
    if qtype not in TYPES:
        raise _fail(where, f"question.type must be one of {', '.join(TYPES)}, got {qtype!r}")
    instructions = _text(q.get("instructions"), where, "question.instructions")
    criteria = q.get("criteria")
    labels = record.get("labels")
    if labels is not None and (not isinstance(labels, list) or not all(isinstance(label, str) for label in labels)):
        raise _fail(where, "labels must be a list of strings")
    expected = record.get("expected")
    if qtype == "choice":
        if not isinstance(criteria, Mapping) or not criteria:
            raise _fail(where, "a choice question needs criteria {option_id: description or null}")
        labels = labels or [str(k) for k in criteria]
        unknown = set(map(str, criteria)) - set(labels)
        if unknown:
            raise _fail(where, f"criteria name options that are not labels: {sorted(unknown)}")
        options = [(label, criteria.get(label) or label) for label in labels]
        expected = str(expected) if expected is not None else None
    elif qtype == "noul":
        if labels is not None and labels != ["no", "yes"]:
            raise _fail(where, f'a noul task has labels ["no", "yes"], got {labels}')
        described = criteria if isinstance(criteria, Mapping) else {}
        texts = {}
        for label, key in (("no", "false"), ("yes", "true")):
            desc = described.get(key, described.get(label))
            texts[label] = f"{label}: {desc}" if isinstance(desc, str) and desc.strip() else label
        options = [("no", texts["no"]), ("yes", texts["yes"])]
        expected = _yes_no(expected, where) if expected is not None else None
    else:  # score
        if not isinstance(criteria, list) or not 2 <= len(criteria) <= 10:
            raise _fail(where, "a score question needs criteria: an ordered list of 2 to 10 level texts")
        levels = [str(i) for i in range(len(criteria))]
        if labels is not None and labels != levels:
            raise _fail(where, f"a score task with {len(criteria)} levels has labels {levels}, got {labels}")
        options = [(str(i), _text(text, where, f"question.criteria[{i}]")) for i, text in enumerate(criteria)]
        if expected is not None:
            if isinstance(expected, bool) or not isinstance(expected, (int, str)) or not str(expected).isdigit():
                raise _fail(where, f"expected of a score task must be a level number, got {expected!r}")
            expected = str(int(expected))
    return {"type": qtype, "question": instructions, "options": options, "expected": expected}


def _from_decision(record: Mapping[str, Any], where: str) -> dict[str, Any]:
    items = record["options"]
    if not isinstance(items, list):
        raise _fail(where, "options must be a list")
    options = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            options.append((item, item))
        elif isinstance(item, Mapping) and isinstance(item.get("id"), str):
            options.append((item["id"], item.get("text") or item["id"]))
        else:
            raise _fail(where, f"options[{i}] must be a string or {{id, text}}")
    qtype = record.get("type", "choice")
    if qtype not in TYPES:
        raise _fail(where, f"type must be one of {', '.join(TYPES)}, got {qtype!r}")
    expected = record.get("expected")
    if qtype == "noul" and expected is not None:
        expected = _yes_no(expected, where)
    return {
        "type": qtype,
        "question": _text(record.get("question"), where, "question"),
        "options": options,
        "expected": str(expected) if expected is not None else None,
    }


def task_from_record(record: Mapping[str, Any], where: str = "task") -> Task:
    """One task from a JevBench record or a decision-format record; raises ``TaskFormatError``."""
    if not isinstance(record, Mapping):
        raise _fail(where, "a task record must be a JSON object")
    tid = record.get("id")
    if not isinstance(tid, (str, int)) or isinstance(tid, bool) or str(tid) == "":
        raise _fail(where, "id must be a non-empty string")
    where = f"{where} ({tid})"
    state = record.get("state")
    if state is None or (isinstance(state, str) and not state.strip()) or (not isinstance(state, str) and not state):
        raise _fail(where, "state is missing or empty")
    if isinstance(record.get("question"), Mapping):
        parsed = _from_jevbench(record, where)
    elif "options" in record:
        parsed = _from_decision(record, where)
    else:
        raise _fail(
            where,
            "neither a JevBench record (question: {type, instructions, criteria}) "
            "nor a decision record (question, options)",
        )
    options = _check_options(parsed["options"], where)
    expected = parsed["expected"]
    if expected is None:
        raise _fail(where, "expected (the correct label) is missing")
    if expected not in {oid for oid, _ in options}:
        raise _fail(where, f"expected {expected!r} is not one of the labels {[o for o, _ in options]}")
    split = record.get("split") or "test"
    group = record.get("group")
    return Task(
        id=str(tid),
        family=str(record.get("family") or parsed["type"]),
        type=parsed["type"],
        state=state,
        question=parsed["question"],
        options=options,
        expected=expected,
        split=str(split),
        group=str(group) if group is not None else None,
        provenance=record.get("provenance"),
    )


def parse_tasks(lines: Iterable[str], source: str = "tasks") -> list[Task]:
    """Tasks from JSONL lines (blank lines and lines starting with ``//`` are skipped)."""
    tasks, seen = [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        where = f"{source}:{number}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise _fail(where, f"not JSON ({exc})") from None
        task = task_from_record(record, where)
        if task.id in seen:
            raise _fail(where, f"duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise TaskFormatError(f"{source}: no tasks")
    return tasks


def load_tasks(
    path: str | Path | None = None, *, limit: int | None = None, families: Iterable[str] | None = None
) -> list[Task]:
    """Tasks from a JSONL file (default: the packaged set), optionally a family filter and ``limit``."""
    source = default_tasks_path() if path is None else Path(path)
    name = "tasks.jsonl (packaged)" if path is None else str(path)
    tasks = parse_tasks(source.read_text(encoding="utf-8").splitlines(), name)
    if families is not None:
        wanted = set(families)
        tasks = [t for t in tasks if t.family in wanted]
    return select(tasks, limit)


def select(tasks: Sequence[Task], limit: int | None) -> list[Task]:
    """The first ``limit`` tasks taken round-robin across families (file order within a family),
    so a small limit still covers every family; ``None`` keeps all, in file order."""
    if limit is None or limit >= len(tasks):
        return list(tasks)
    if limit < 1:
        raise ValueError("limit must be at least 1")
    by_family: dict[str, list[Task]] = {}
    for task in tasks:
        by_family.setdefault(task.family, []).append(task)
    picked: list[Task] = []
    queues = [list(v) for v in by_family.values()]
    while len(picked) < limit:
        for queue in queues:
            if queue and len(picked) < limit:
                picked.append(queue.pop(0))
    chosen = {t.id for t in picked}
    return [t for t in tasks if t.id in chosen]  # back in file order: tasks about one state stay together


def resolve_tasks(tasks: str | Path | Iterable[Task] | None = None, limit: int | None = None) -> tuple[list[Task], str]:
    """(tasks, where they came from) from a path, a list of tasks, or None (the packaged set)."""
    if tasks is None:
        return load_tasks(None, limit=limit), "the packaged task set (workshop_lib/evaluation/data/tasks.jsonl)"
    if isinstance(tasks, (str, Path)):
        return load_tasks(tasks, limit=limit), str(tasks)
    return select(list(tasks), limit), "the given tasks"


__all__ = [
    "ORDERS",
    "TYPES",
    "Task",
    "TaskFormatError",
    "default_tasks_path",
    "load_tasks",
    "parse_tasks",
    "permutation",
    "resolve_tasks",
    "rotation",
    "select",
    "task_from_record",
]
