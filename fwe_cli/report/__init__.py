"""`fwe report`: pictures (PNG) and a Markdown summary of what fwe measured.

    fwe report artifacts/measure/<UTC>/summary.json artifacts/tune/<UTC>/summary.json logs/ --out report/

Inputs are recognised by content (`inputs`): a `fwe measure` or `fwe tune` summary, a `fwe smoke` artifact (its
regression record when gated with --baseline), or heartbeat JSON lines (one file, or a training job's directory of
heartbeat_rank*.jsonl). The series each picture draws are pure functions of those (`series` for heartbeat lines,
`figures` for artifacts, `mix_shares` for a mix's sources against their weights); `plan` names the pictures of each
input, `draw` renders them with matplotlib (an optional extra, imported only there), `markdown` writes report.md and
`build` runs it all. No typer or rich here: the command is fwe_cli/cli/report_cmd.py.
"""
