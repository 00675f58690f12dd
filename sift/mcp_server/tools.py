"""The MCP tools: Sift's fetch and batch routes, described for a model (docs/MCP.md).

Each tool calls the running Sift through `sift.client` with the caller's key; a failure answer
becomes the tool error, with the envelope's error and what its hint asks the model to do.
Content is paged (`paging.page`) so no answer exceeds `max_length` characters.
"""

from __future__ import annotations

import contextlib
import inspect
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from sift.client import TERMINAL, APIError, AsyncClient, ClientError, JobStatus
from sift.client.types import Mode
from sift.constants import MAX_AGE_MAX
from sift.mcp_server import paging
from sift.mcp_server.views import (
    JobListView,
    JobSummaryView,
    document,
    heading,
    hint_advice,
    job_summary,
    progress_message,
)

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
PROGRESS_EVERY = 2.0  # seconds between batch_wait's status reads (and progress notifications)
KEPT_JOBS = 4  # ended jobs whose results batch_result keeps, for reading page after page

URL = Annotated[str, Field(description="The http(s) URL to read.", min_length=1, max_length=8192)]
MODE = Annotated[
    Mode,
    Field(
        description="clean: the main content as Markdown, navigation/ads/comments removed (best "
        "for articles and docs) · markdown: the whole page as Markdown · text: plain text · "
        "raw: the body as served (text types only) · links: the page's links, one per line."
    ),
]
QUESTION = Annotated[
    str | None,
    Field(
        description="Ask this instead of reading the page: the content becomes the answer, "
        "drawn from the page's best passages. Saves context on long pages.",
        max_length=4096,
    ),
]
PAGES = Annotated[
    str | None,
    Field(description="PDF only: 1-based pages, e.g. '3', '1-5', '1-3,7,10-'.", max_length=4096),
]
GREP = Annotated[
    str | None,
    Field(
        description="A regular expression (RE2): return only the matching lines, numbered, "
        "with a line of context each side. Not together with jq.",
        max_length=4096,
    ),
]
JQ = Annotated[
    str | None,
    Field(
        description="A jq program applied to a JSON response, e.g. '.items[].name'.",
        max_length=4096,
    ),
]
CONTEXT = Annotated[
    bool | None,
    Field(description="With question: include the supporting passages (default true)."),
]
RECOVER_HELP = (
    "When the live page fails (error, bot wall, timeout, gone), read the closest archived copy "
    "from the web archive instead."
)
RECOVER = Annotated[bool, Field(description=RECOVER_HELP)]
LINKS = Annotated[
    bool | None,
    Field(description="clean/markdown: links as [text](URL) (default true); false keeps the text."),
]
IMAGES = Annotated[
    bool | None,
    Field(description="clean/markdown: images as ![alt](URL) (default true); false drops them."),
]
MAX_AGE = Annotated[
    int | None,
    Field(
        description="Seconds a cached copy may be old (cached pages are reused for 15 min by "
        "default); 0 fetches the page again now.",
        ge=0,
        le=MAX_AGE_MAX,
    ),
]
ACCEPT_VERDICTS = Annotated[
    list[Literal["empty", "soft_404", "bot_wall", "login_wall"]] | None,
    Field(
        description="Verdicts that return the page anyway instead of failing, e.g. "
        "['soft_404'] to read a not-found page; the answer's verdict says what it is."
    ),
]
START_INDEX = Annotated[
    int,
    Field(
        description="Where to start reading, in characters: 0 for the beginning; when an answer "
        "was cut, its last line names the start_index that continues it.",
        ge=0,
    ),
]
MAX_LENGTH = Annotated[
    int,
    Field(
        description="The most characters this call returns, everything included.",
        ge=paging.MAX_LENGTH_MIN,
        le=paging.MAX_LENGTH_MAX,
    ),
]
JOB_ID = Annotated[str, Field(description="The job_id that batch_submit returned.", min_length=1)]


class TargetIn(BaseModel):
    """One URL of a batch, with its own options (the same as fetch's)."""

    model_config = ConfigDict(extra="forbid")
    url: URL
    mode: MODE | None = None
    question: QUESTION = None
    pages: PAGES = None
    grep: GREP = None
    jq: JQ = None
    context: CONTEXT = None
    recover: Annotated[bool | None, Field(description=RECOVER_HELP)] = None
    links: LINKS = None
    images: IMAGES = None
    max_age: MAX_AGE = None
    accept_verdicts: ACCEPT_VERDICTS = None


class SubmitView(TypedDict, total=False):
    job_id: str
    status: str
    targets: int
    reused: bool
    worker: str
    warning: str
    retry_of: str
    next: str


class CancelView(TypedDict):
    job_id: str
    status: str
    next: str


INSTRUCTIONS = """\
Sift reads web pages for you and returns clean, bounded text; it refuses private and internal \
addresses. For ONE URL call fetch. For TWO OR MORE URLs do not loop over fetch: call \
batch_submit once with all of them (up to 32, each with its own options), then batch_wait \
(it holds until the job ends and reports progress), then batch_result for each target you \
need. Prefer the smallest view that answers your need: question, grep, jq or pages. When an \
answer is cut, its last line says which start_index continues it. On a failure, act on the \
hint in the error (recover, retry, browser, pages, grep, question)."""


def build(client: AsyncClient, *, progress_every: float = PROGRESS_EVERY) -> MCPServer:
    """The MCP server with Sift's tools, calling Sift through `client`."""

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await client.close()  # in the loop that opened its connections

    server: MCPServer = MCPServer(
        name="sift", instructions=INSTRUCTIONS, log_level="WARNING", lifespan=lifespan
    )
    s = _Session(client, server, progress_every)
    tools = (
        _fetch_tool,
        _submit_tool,
        _wait_tool,
        _result_tool,
        _cancel_tool,
        _retry_tool,
        _list_tool,
    )
    for register in tools:  # in the order the server lists them
        register(s)
    return server


class _Session:
    """What the tools of one server share: the client, and the ended jobs whose results
    batch_result keeps for reading page after page."""

    def __init__(self, client: AsyncClient, server: MCPServer, progress_every: float) -> None:
        self.client = client
        self.server = server
        self.progress_every = progress_every
        self.ended: OrderedDict[str, JobStatus] = OrderedDict()  # job id -> ended status

    def tool(self, **options: Any) -> Callable[[F], F]:
        def register(fn: F) -> F:
            return self.server.tool(description=for_model(fn.__doc__ or ""), **options)(fn)

        return register

    async def call(self, pending: Awaitable[T]) -> T:
        try:
            return await pending
        except APIError as e:
            raise ToolError(f"{e.error} (HTTP {e.status}){hint_advice(e.hint)}") from None
        except ClientError as e:
            raise ToolError(f"{e} (is Sift running at SIFT_URL, with a valid SIFT_KEY?)") from None

    def paged(self, env: Any, start_index: int, max_length: int, again: str) -> str:
        try:
            return paging.page(heading(env), document(env), start_index, max_length, again)
        except paging.PastTheEnd as e:
            raise ToolError(str(e)) from None

    def keep(self, st: JobStatus) -> None:
        _keep(self.ended, st)

    async def status(self, job_id: str) -> JobStatus:
        """The job with its results: kept if it ended, else read from Sift."""
        st = self.ended.get(job_id)
        if st is None:
            st = await self.call(self.client.batch_status(job_id, results=True))
            self.keep(st)
        else:
            self.ended.move_to_end(job_id)
        return st


def _fetch_tool(s: _Session) -> None:
    @s.tool(
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True, title="Read a URL"),
        structured_output=False,  # the content once, as text, not again as a JSON copy
    )
    async def fetch(
        url: URL,
        mode: MODE = "clean",
        question: QUESTION = None,
        pages: PAGES = None,
        grep: GREP = None,
        jq: JQ = None,
        context: CONTEXT = None,
        recover: RECOVER = False,
        links: LINKS = None,
        images: IMAGES = None,
        max_age: MAX_AGE = None,
        accept_verdicts: ACCEPT_VERDICTS = None,
        start_index: START_INDEX = 0,
        max_length: MAX_LENGTH = paging.MAX_LENGTH_DEFAULT,
    ) -> str:
        """Read one web page, PDF, text file or JSON API and get its content as clean text.

        Use it for a single URL; for two or more, use batch_submit instead. The answer starts
        with the title, the final URL and what was returned, then the content. Narrow what you
        read with question, grep, jq or pages rather than paging through a long page. Content is
        bounded: at most max_length characters come back per call; when more remains, the last
        line says which start_index to call with next (same other arguments)."""
        env = await s.call(
            s.client.fetch(
                url,
                mode=mode,
                question=question,
                pages=pages,
                grep=grep,
                jq=jq,
                context=context,
                recover=recover or None,
                links=links,
                images=images,
                max_age=max_age,
                accept_verdicts=accept_verdicts or None,
            )
        )
        return s.paged(env, start_index, max_length, "fetch with the same arguments")


def _submit_tool(s: _Session) -> None:
    @s.tool(annotations=ToolAnnotations(open_world_hint=True, title="Submit a batch"))
    async def batch_submit(
        targets: Annotated[
            list[TargetIn | Annotated[str, Field(max_length=8192)]],
            Field(
                description="The URLs to read, in order: plain URL strings, or objects with a "
                "url and that target's own options. At most 32 per job.",
                min_length=1,
            ),
        ],
        fresh: Annotated[
            bool,
            Field(
                description="Fetch again even if the same list was submitted recently (by "
                "default the earlier job and its results are returned, with reused=true)."
            ),
        ] = False,
    ) -> SubmitView:
        """Start reading a list of URLs in the background and return a job_id at once.

        Use it whenever you need two or more URLs: Sift fetches them politely one after another
        while you wait in one call. Then call batch_wait(job_id) and read each target with
        batch_result(job_id, idx); idx is the target's 0-based position in this list. A refused
        URL (private address, bad port, not http/https) rejects the whole submit with
        'target N: …': drop target N and submit again."""
        items = [t if isinstance(t, str) else t.model_dump(exclude_none=True) for t in targets]
        reply = await s.call(s.client.batch_submit(items, fresh=fresh))
        return _submitted(reply)


def _wait_tool(s: _Session) -> None:
    @s.tool(annotations=ToolAnnotations(read_only_hint=True, title="Wait for a batch"))
    async def batch_wait(
        job_id: JOB_ID,
        ctx: Context,
        timeout: Annotated[
            float,
            Field(description="Seconds to wait at most (0 to just look).", ge=0, le=600),
        ] = 60,
    ) -> JobSummaryView:
        """Wait until a batch job ends (or timeout seconds pass) and summarise every target.

        Each target shows its status (done, failed, pending), title and size in characters
        when done, or error and hint when failed. It returns as soon as the job ends, and sends
        progress notifications while it waits. If the job is still running when it returns,
        call it again. Then read content with batch_result(job_id, idx)."""
        shown = -1

        async def progress(st: JobStatus) -> None:
            nonlocal shown
            done, total = st.get("targets_done", 0), st.get("targets_total")
            if done > shown:  # progress must increase from one notification to the next
                shown = done
                await ctx.report_progress(done, total, progress_message(st))

        st = await s.call(
            s.client.batch_wait(
                job_id,
                timeout=timeout,
                results=False,
                on_progress=progress,
                round_seconds=s.progress_every,
            )
        )
        st = await s.call(s.client.batch_status(job_id, results=True))  # titles and sizes
        s.keep(st)
        return job_summary(st)


def _result_tool(s: _Session) -> None:
    @s.tool(
        annotations=ToolAnnotations(read_only_hint=True, title="Read a batch result"),
        structured_output=False,
    )
    async def batch_result(
        job_id: JOB_ID,
        idx: Annotated[int, Field(description="The target's 0-based position in the list.", ge=0)],
        start_index: START_INDEX = 0,
        max_length: MAX_LENGTH = paging.MAX_LENGTH_DEFAULT,
    ) -> str:
        """Read one target of a batch job: its content, like fetch returns it.

        Bounded like fetch: at most max_length characters per call; when more remains, the last
        line says which start_index to call with next. A failed target answers with its error
        and hint; a target not fetched yet says to call batch_wait first."""
        result = _result_of(await s.status(job_id), idx)
        again = f"batch_result with job_id={job_id!r}, idx={idx}"
        return s.paged(result, start_index, max_length, again)


def _result_of(st: JobStatus, idx: int) -> Any:
    """Target `idx`'s stored result, or the tool error that says why there is none."""
    targets = st.get("targets", [])
    if idx >= len(targets):
        n = len(targets)
        raise ToolError(f"the job has {n} target{'' if n == 1 else 's'}: idx is 0 to {n - 1}")
    t = targets[idx]
    if t["status"] == "failed":
        raise ToolError(f"target {idx} failed: {t.get('error')}{hint_advice(t.get('hint'))}")
    if t["status"] != "done":
        raise ToolError(f"target {idx} is {t['status']}, not fetched yet: call batch_wait first")
    if "result" not in t:
        raise ToolError(f"target {idx} has no stored result")
    return t["result"]


def _cancel_tool(s: _Session) -> None:
    @s.tool(
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, title="Cancel")
    )
    async def batch_cancel(job_id: JOB_ID) -> CancelView:
        """Stop a batch job: no further target starts; targets already read stay readable.

        A job that already ended cannot be cancelled (the error names its final status)."""
        reply = await s.call(s.client.batch_cancel(job_id))
        return {
            "job_id": job_id,
            "status": reply["status"],
            "next": "targets already fetched stay readable with batch_result(job_id, idx)",
        }


def _retry_tool(s: _Session) -> None:
    @s.tool(annotations=ToolAnnotations(open_world_hint=True, title="Retry failed targets"))
    async def batch_retry(
        job_id: JOB_ID,
        only_retryable: Annotated[
            bool,
            Field(
                description="Retry only the targets whose failure may pass (busy, timed out, "
                "upstream 5xx), not those that will fail the same way again."
            ),
        ] = False,
    ) -> SubmitView:
        """Run the failed targets of an ended batch job again, as a new job.

        The new job keeps the targets' options and order (new idx 0, 1, …) and names the old
        one in retry_of. Wait for it with batch_wait(new job_id). Fails if the job is still
        running or had no failed target."""
        reply = await s.call(s.client.batch_retry(job_id, only_retryable=only_retryable))
        return _submitted(reply)


def _list_tool(s: _Session) -> None:
    @s.tool(annotations=ToolAnnotations(read_only_hint=True, title="List batch jobs"))
    async def batch_list(
        limit: Annotated[int, Field(description="Jobs per page.", ge=1, le=100)] = 20,
        cursor: Annotated[
            str | None, Field(description="next_cursor of the previous page.", max_length=1024)
        ] = None,
    ) -> JobListView:
        """List your batch jobs (running ones first, then the newest), e.g. to find a job_id you
        lost. Each entry has the job's status and target counts; next_cursor pages on."""
        page = await s.call(s.client.batch_list(limit=limit, cursor=cursor))
        return {"jobs": page.get("jobs", []), "next_cursor": page.get("next_cursor")}


def for_model(doc: str) -> str:
    """A docstring as a model should read it: paragraphs on one line each, no indentation."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def _submitted(reply: dict[str, Any]) -> SubmitView:
    keys = ("job_id", "status", "targets", "reused", "worker", "warning", "retry_of")
    out: SubmitView = {k: reply[k] for k in keys if k in reply}  # type: ignore[misc]
    out["next"] = f"call batch_wait(job_id={reply['job_id']!r}) to collect the results"
    return out


def _keep(ended: OrderedDict[str, JobStatus], st: JobStatus) -> None:
    """Keep a job whose results can no longer change: ended, and no target still in flight (a
    cancelled job's running target is stored when it finishes)."""
    if st["status"] not in TERMINAL or any(t["status"] == "running" for t in st["targets"]):
        return
    ended[st["job_id"]] = st
    ended.move_to_end(st["job_id"])
    while len(ended) > KEPT_JOBS:
        ended.popitem(last=False)
