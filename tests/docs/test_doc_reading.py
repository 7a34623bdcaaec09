"""How tests/docs reads the docs: commands as a shell splits them, shown output as a shape."""

from __future__ import annotations

import json

from tests.docs.doc_commands import shell_blocks, split_commands
from tests.docs.output_shapes import error_answer, expected_output, output_mismatch

BLOCK = """\
# a heading comment, no command before it
curl -s -X POST localhost:8000/v1/runs -H 'content-type: application/json' \\
     -d '{"input": "a # is not a comment in quotes"}'   # but this is
# → 201 {"id": "run_…", "state": "running", …}

curl -N localhost:8000/agui -d '{
  "threadId": "t1",
  "runId": "r-'"$(date +%s%N)"'"}'
printf '%s\\n' one two |
  wc -l
OTEL_A=1 \\
OTEL_B=2 loopgate serve   # one run in ten
"""


def commands() -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.key, c.comment, c.notes) for c in split_commands("x.md", 1, "sh", BLOCK.split("\n"))]


def test_a_block_splits_into_the_commands_a_shell_would_run() -> None:
    assert commands() == [
        (
            "curl -s -X POST localhost:8000/v1/runs -H 'content-type: application/json' "
            '-d \'{"input": "a # is not a comment in quotes"}\'',
            "but this is",
            ('→ 201 {"id": "run_…", "state": "running", …}',),
        ),
        (
            'curl -N localhost:8000/agui -d \'{ "threadId": "t1", '
            '"runId": "r-\'"$(date +%s%N)"\'"}\'',
            "",
            (),
        ),
        ("printf '%s\\n' one two | wc -l", "", ()),
        ("OTEL_A=1 OTEL_B=2 loopgate serve", "one run in ten", ()),
    ]


def test_only_shell_blocks_count() -> None:
    markdown = "```python\nprint(1)\n```\n\n```sh\nls\n```\n\n```\nnot tagged\n```\n"
    assert shell_blocks(markdown) == [(6, "sh", ["ls"])]


def test_a_console_block_has_commands_after_its_prompt() -> None:
    found = split_commands("x.md", 1, "console", ["$ loopgate --version", "loopgate 0.1.0"])
    assert [(c.key, c.notes) for c in found] == [("loopgate --version", ("loopgate 0.1.0",))]


RUN = {
    "id": "run_8a9b",
    "thread_id": "run_8a9b",
    "state": "running",
    "created_at": 1796108040543010887,
    "links": {"self": "/v1/runs/run_8a9b", "events": "/v1/runs/run_8a9b/events"},
}


def test_shown_json_is_a_shape() -> None:
    shown = expected_output(
        (
            '→ 201 {"id": "run_3f26…", "state": "running", "created_at": 1796024971708043610, …,',
            ' "links": {…, "events": "/v1/runs/run_…/events"}}',
        ),
        "",
    )
    assert output_mismatch(shown, json.dumps(RUN)) is None
    assert "keys" in str(
        output_mismatch(expected_output(('{"id": "run_…"}',), ""), json.dumps(RUN))
    )
    finished = {**RUN, "state": "finished"}
    assert "'finished'" in str(output_mismatch(shown, json.dumps(finished)))
    wrong_link = {**RUN, "links": {"events": "/v1/threads/x/events"}}
    assert output_mismatch(shown, json.dumps(wrong_link)) is not None
    assert output_mismatch(shown, "Internal Server Error") is not None


def test_a_status_line_and_a_fragment() -> None:
    shown = expected_output(("201, Location: /v1/runs/run_…", '{"id": "run_…", …}'), "")
    assert output_mismatch(shown, json.dumps(RUN)) is None
    fragment = expected_output(('… "links":{"self":"/v1/runs/run_…", "events": …} …',), "")
    assert output_mismatch(fragment, json.dumps(RUN)) is None
    assert output_mismatch(fragment, json.dumps({"id": "run_1"})) is not None


def test_small_numbers_compare_and_timestamps_do_not() -> None:
    shown = expected_output(('{"accepted":2,"ts":1796024971708043610}',), "")
    assert output_mismatch(shown, '{"accepted":2,"ts":5}') is None
    assert output_mismatch(shown, '{"accepted":3,"ts":5}') is not None
    assert output_mismatch(shown, '{"accepted":2,"ts":"5"}') is not None
    assert output_mismatch(shown, '{"accepted":true,"ts":5}') is not None


def test_a_placeholder_in_a_string() -> None:
    shown = expected_output(('{"traceparent":"00-4bf9-<run span id>-01"}',), "")
    assert output_mismatch(shown, '{"traceparent":"00-4bf9-00f067aa-01"}') is None
    assert output_mismatch(shown, '{"traceparent":"00-4bf9-00f067aa-00"}') is not None


def test_shown_lines_are_the_first_lines() -> None:
    shown = expected_output(
        ("id: 1", "event: stage_start", 'data: {"seq":1,"kind":"stage_start"}', "", "…"), ""
    )
    good = 'id: 1\nevent: stage_start\ndata: {"seq":1,"kind":"stage_start"}\n\nid: 2\n'
    assert output_mismatch(shown, good) is None
    assert output_mismatch(shown, good.replace("stage_start", "error")) is not None
    assert output_mismatch(shown, good.replace('"seq":1', '"seq":1,"x":0')) is not None
    assert output_mismatch(shown, "id: 1\n") is not None


def test_a_json_value_in_a_comment_is_shown_output_and_prose_is_not() -> None:
    shown = expected_output((), 'newest first, {"runs": […]}')
    assert output_mismatch(shown, '{"runs": [{"id": "run_1"}]}') is None
    assert output_mismatch(shown, '{"threads": []}') is not None
    assert expected_output(("applied at the next round boundary",), "").mode == "remark"


def test_an_error_answer_is_told_apart() -> None:
    problem = {"type": "about:blank", "title": "Not Found", "status": 404, "detail": "no run"}
    assert error_answer(json.dumps(problem)) == "the server answered 404: 'no run'"
    assert error_answer('{"jsonrpc":"2.0","error":{"code":-32601},"id":1}') is not None
    assert error_answer('{"status":"ok","adapters":[]}') is None
    assert error_answer("id: 1\nevent: stage_start\n") is None


def test_notes_of_two_lines_or_more_are_the_output_as_printed() -> None:
    notes = ("Let me look that up.", "", "25 * 16 + 2 = 402. <a closing line>")
    expected = expected_output(notes, "")
    assert expected.mode == "text"
    printed = "Let me look that up.\n\n25 * 16 + 2 = 402. Let me know if you need anything else.\n"
    assert output_mismatch(expected, printed) is None
    # A changed answer fails, and so does a line more or fewer.
    assert output_mismatch(expected, printed.replace("402", "398")) is not None
    assert output_mismatch(expected, printed + "more\n") is not None
    assert output_mismatch(expected, "Let me look that up.\n") is not None
    # "tools: [...]" is text here, not a field with a JSON value.
    listed = expected_output(("tools: ['run']", "…"), "")
    assert output_mismatch(listed, "tools: ['run']\n  [1] started\n") is None


def test_one_note_line_is_a_remark() -> None:
    assert expected_output(("applied at the next round boundary",), "").mode == "remark"


def test_a_trailing_comment_after_an_arrow_is_the_one_line_printed() -> None:
    expected = expected_output((), "→ loopgate 0.1.0")
    assert output_mismatch(expected, "loopgate 0.1.0\n") is None
    assert output_mismatch(expected, "loopgate 0.2.0\n") is not None
    assert expected_output((), "127.0.0.1:8000, the embedded scripted model").mode == "remark"
