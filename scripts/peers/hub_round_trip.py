"""The floor of a warm `fwe smoke --source hub`: the interpreter plus one round trip to the Hub, the HEAD of the
dataset card that says whether the branch still points at the cached commit (on a new connection, as a fresh process
has no other). Run: HF_ENDPOINT=... python scripts/peers/hub_round_trip.py; `python -m scripts.bench.hub_start` times
it (whole process) beside fwe and the `datasets` script."""
import http.client
import os
import sys
from urllib.parse import urlsplit

endpoint = urlsplit(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
connection = (http.client.HTTPSConnection if endpoint.scheme == "https" else http.client.HTTPConnection)(
    endpoint.hostname, endpoint.port, timeout=30)
connection.request("HEAD", "/datasets/HuggingFaceFW/fineweb-edu/resolve/main/README.md")
answer = connection.getresponse()
answer.read()
sys.exit(0 if answer.status == 200 and answer.getheader("X-Repo-Commit") else 1)
