"""What a notebook shows: a picture where people look, the same facts as text for logs and CI.

* ``DecisionView``: one decision (or the answers of one shared-state request) as a horizontal
  bar chart of its probabilities, with the policy's threshold and outcome when one is applied.
  Jupyter shows the chart; ``str()`` and the notebook file's ``text/plain`` keep the text.
* ``row``, ``shorten`` and ``excerpt``: text cut or wrapped only where a word or a line ends
  (browsers break a long output line wherever it reaches the edge, mid-word included).
* ``install_error_handler``: in a notebook, the mistakes a participant is expected to make
  (a missing earlier step, bad input, no quota, a refused request) print one line that says
  what to do instead of a traceback through the library. Anything else keeps its traceback.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError, NoCredentialsError, ProfileNotFound

from .errors import WorkshopError

if TYPE_CHECKING:  # matplotlib and IPython (the notebooks extra) are imported only where they are used
    from IPython.core.interactiveshell import InteractiveShell
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TEXT_WIDTH = 100  # characters of a notebook's text output that fit without the browser breaking them

# ---- text that breaks between words --------------------------------------------------------


def row(head: str, detail: str, width: int = TEXT_WIDTH) -> str:
    """``head`` then ``detail`` wrapped at word boundaries, continued under the detail's first column."""
    indent = " " * len(head)
    if not detail:
        return head.rstrip()
    return textwrap.fill(
        detail,
        width=max(width, len(head) + 20),
        initial_indent=head,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def shorten(text: str, width: int = TEXT_WIDTH) -> str:
    """``text`` on one line, cut at a word boundary to at most ``width`` characters (marked with …)."""
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder=" …")


def excerpt(path: str | Path, lines: int = 40) -> str:
    """A file's first ``lines`` whole lines, then how many more there are and where."""
    path = Path(path)
    kept = path.read_text().splitlines()
    if len(kept) <= lines:
        return "\n".join(kept)
    rest = len(kept) - lines
    return "\n".join(kept[:lines] + [f"… {rest} more line{'s' if rest != 1 else ''} in {path}"])


# ---- decision charts -----------------------------------------------------------------------

ACCEPTED_COLOUR = "#2e7d32"
FALLBACK_COLOUR = "#e65100"
BAR_COLOUR = "#5c7cbd"
NOT_ALLOWED_COLOUR = "#b0b0b0"
WIDTH_IN = 6.4  # inches at 100 dpi: fits a notebook's output area without scaling the text down


# What a chart (and the evaluation's views built on it) reads of a ``client.Decision``, a ``decisions.Outcome`` and
# a ``decisions.Policy``: the client is a layer above this module, so these say the shape, not import the classes.
class ShownDecision(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def option_ids(self) -> Sequence[str]: ...
    @property
    def probabilities(self) -> Sequence[float]: ...
    @property
    def client_latency_ms(self) -> float: ...
    @property
    def server_ms(self) -> float | None: ...
    @property
    def raw(self) -> Mapping[str, Any]: ...
    @property
    def readout(self) -> str | None: ...


class ShownOutcome(Protocol):
    @property
    def option_id(self) -> str: ...
    @property
    def accepted(self) -> bool: ...
    @property
    def rule(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def top(self) -> str: ...


class ShownPolicy(Protocol):
    @property
    def threshold(self) -> float: ...
    @property
    def allowed(self) -> Collection[str] | None: ...

    def apply(self, decision: Any) -> ShownOutcome: ...  # Any: the policy takes more than a chart's decisions


def _bar(p: float, width: int = 24) -> str:
    filled = round(p * width)
    return "#" * filled + "." * (width - filled)


def _ranked(decision: ShownDecision) -> list[tuple[str, float]]:
    return sorted(zip(decision.option_ids, decision.probabilities), key=lambda r: -r[1])


def _timing(decision: ShownDecision) -> str:
    server = decision.server_ms
    return f"client {decision.client_latency_ms:.0f} ms" + (f", server {server:.0f} ms" if server else "")


def outcome_line(outcome: ShownOutcome) -> str:
    """A ``decisions.Outcome`` in one line: what the application does, and why."""
    reason = outcome.reason.removesuffix(f"; fell back to {outcome.option_id}")  # said once, up front
    return f"{'act on' if outcome.accepted else 'fall back to'} {outcome.option_id}: {reason}"


class DecisionView:
    """Decisions as a chart (in Jupyter) and as text (``str``, logs, the notebook's text/plain).

    ``decisions`` are ``client.Decision`` objects; several of them are the answers of one
    shared-state request, so the request's time is shown once for all of them.
    """

    def __init__(
        self,
        decisions: Sequence[ShownDecision],
        *,
        policy: ShownPolicy | None = None,
        latency: bool = True,
        shared: bool = False,
    ):
        self.decisions = list(decisions)
        self.policy = policy
        self.latency = latency
        self.shared = shared
        self.outcomes: list[ShownOutcome | None] = (
            [policy.apply(d) for d in self.decisions] if policy is not None else [None] * len(decisions)
        )

    @property
    def ok(self) -> bool:
        return bool(self.decisions) and all(d.option_ids for d in self.decisions)

    # -- text --

    def _heading(self) -> str | None:
        if not self.latency or not self.decisions:
            return None
        first = self.decisions[0]
        if self.shared:
            return (
                f"one request, {len(self.decisions)} questions about the same state "
                f"({_timing(first)} for the whole request)"
            )
        return _timing(first)

    def lines(self) -> list[str]:
        out: list[str] = []
        heading = self._heading()
        if self.shared and heading:
            out.append(heading)
        for decision, outcome in zip(self.decisions, self.outcomes):
            out.append(f"{decision.id}:")
            out += [f"  {oid:<18} {p:6.3f}  {_bar(p)}" for oid, p in _ranked(decision)]
            if outcome is not None:
                out.append(f"  {outcome_line(outcome)}")
        if heading and not self.shared:
            out.append(f"  {heading}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    __repr__ = __str__

    # -- picture --

    def figure(self) -> Figure:
        """A matplotlib Figure (not registered with pyplot, so a notebook shows it exactly once)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        heights = [0.42 * len(d.option_ids) + 0.75 for d in self.decisions]
        fig = Figure(figsize=(WIDTH_IN, sum(heights) + 0.5), dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(self.decisions), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        for ax, decision, outcome in zip(axes, self.decisions, self.outcomes):
            self._draw(ax, decision, outcome)
        axes[-1].set_xlabel("probability")
        if self.latency and self.decisions:
            first = self.decisions[0]
            fig.suptitle(
                f"one request, {len(self.decisions)} questions: {_timing(first)}" if self.shared else _timing(first),
                fontsize=10,
                color="#444444",
            )
        return fig

    def _draw(self, ax: Axes, decision: ShownDecision, outcome: ShownOutcome | None) -> None:
        rows = _ranked(decision)
        ids = [oid for oid, _ in rows]
        values = [p for _, p in rows]
        allowed = self.policy.allowed if self.policy is not None else None
        colours = []
        for oid in ids:
            if allowed is not None and oid not in allowed:
                colours.append(NOT_ALLOWED_COLOUR)
            elif outcome is not None and oid == outcome.top:
                colours.append(ACCEPTED_COLOUR if outcome.accepted else FALLBACK_COLOUR)
            else:
                colours.append(BAR_COLOUR)
        y = range(len(ids))
        ax.barh(y, values, color=colours, height=0.6)
        ax.set_yticks(list(y), ids, fontsize=10)
        ax.invert_yaxis()  # most probable on top
        ax.set_xlim(0, 1.12)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
        for i, p in enumerate(values):
            ax.text(p + 0.01, i, f"{p:.3f}", va="center", fontsize=9)
        title = decision.id
        if outcome is not None:
            assert self.policy is not None  # outcomes come from the policy
            if self.policy.threshold > 0:
                ax.axvline(self.policy.threshold, color="#333333", linestyle="--", linewidth=1)
                ax.text(
                    self.policy.threshold + 0.01,
                    0.02,
                    f"threshold {self.policy.threshold:.2f}",
                    fontsize=8,
                    va="bottom",
                    transform=ax.get_xaxis_transform(),
                )
            verdict = (
                f"act on {outcome.option_id}"
                if outcome.accepted
                else f"fall back to {outcome.option_id} ({outcome.rule.replace('_', ' ')})"
            )
            title += f"  ->  {verdict}"
            ax.set_title(title, fontsize=11, loc="left", color=ACCEPTED_COLOUR if outcome.accepted else FALLBACK_COLOUR)
        else:
            ax.set_title(title, fontsize=11, loc="left")
        ax.spines[["top", "right"]].set_visible(False)

    def _repr_png_(self) -> bytes | None:
        try:
            fig = self.figure()
        except ImportError:  # matplotlib is in the notebooks extra; without it the text is shown
            return None
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        return buffer.getvalue()


# ---- expected mistakes in a notebook ---------------------------------------------------------

# AWS error codes that mean "you may not" or "not enough quota": something to ask for, not a bug.
REFUSED_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "UnrecognizedClientException",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "ResourceLimitExceeded",
        "ServiceQuotaExceededException",
        "LimitExceededException",
        "ThrottlingException",
    }
)


def expected_errors() -> tuple[type[BaseException], ...]:
    """What a notebook shows in one line: every ``errors.WorkshopError`` (its message says what to do),
    missing AWS credentials, and the AWS refusals and quota errors among botocore's ClientErrors."""
    return (WorkshopError, ClientError, NoCredentialsError, ProfileNotFound)


def is_expected(exc: BaseException) -> bool:
    """True for the library's own errors, and for AWS refusals and quota errors; False for bugs."""
    code = getattr(exc, "response", None)
    if isinstance(code, dict) and "Error" in code:  # a botocore ClientError: only refusals and quotas
        return code["Error"].get("Code") in REFUSED_CODES
    return isinstance(exc, expected_errors())


def one_line(exc: BaseException) -> str:
    """What the notebook prints for an expected mistake."""
    return f"{type(exc).__name__}: {exc}"


def install_error_handler(shell: InteractiveShell | None = None) -> bool:
    """In IPython, show expected mistakes as one line, then the notes they carry (a failing step's: the AWS
    requests it sent before it failed), the cell still counting as failed, so Run All stops there and nbmake
    still fails; other exceptions keep their full traceback. Returns whether it was installed (False outside
    IPython)."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False

    def handler(
        self: InteractiveShell,
        etype: type[BaseException],
        value: BaseException,
        tb: TracebackType | None,
        tb_offset: int | None = None,
    ) -> None:
        shown: BaseException | str = value
        if _unset_in_cell(value, tb):
            shown = f"{value}: a cell above has not run in this kernel (a restart forgets them); {RUN_ABOVE}"
        elif not is_expected(value):
            self.showtraceback((etype, value, tb), tb_offset=tb_offset)
            return None
        stb = [f"\x1b[1;31m{etype.__name__}\x1b[0m: {shown}", *getattr(shown, "__notes__", ())]
        self._showtraceback(etype, shown, stb)
        return None

    shell.set_custom_exc((*expected_errors(), NameError), handler)
    return True


RUN_ABOVE = "run the cells above this one (Run > Run All Above Selected Cell), then this one again"


def _unset_in_cell(exc: BaseException, tb: TracebackType | None) -> bool:
    """A NameError raised by a notebook cell's own code (a name an unrun cell defines), not deeper down."""
    if not isinstance(exc, NameError) or tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    name = tb.tb_frame.f_code.co_filename
    return name.startswith("<") or "ipykernel_" in name  # IPython's and ipykernel's names for a cell


__all__ = [
    "TEXT_WIDTH",
    "DecisionView",
    "excerpt",
    "expected_errors",
    "install_error_handler",
    "is_expected",
    "one_line",
    "outcome_line",
    "row",
    "shorten",
]
