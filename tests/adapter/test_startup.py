"""Ready means proven: the adapter says ready only after a real forward pass succeeded.

The crash that motivated this (ggml's AMX kernels dying on the first forward pass)
needs an AMX CPU and a native build, so the failing forward pass is simulated: a
``sitecustomize`` module on the adapter's PYTHONPATH makes llama.cpp's evaluation
fault with SIGSEGV in native code, or return NaN logits. Everything else is the real
server: gunicorn, the real model, the real start-up path.

Below, the model files a real adapter starts on: the published sample's package is served and
described as loaded; a tampered digest or a bent manifest stops it with one line naming the entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time

import pytest

from decision_adapter.startup import LOADING, PROVING, READY, StartupRecord, failure_line
from workshop_lib.models import EMBEDDED_MODEL

FAULTS = """
import os
fault = os.environ.get("TEST_FORWARD_PASS_FAULT")
if fault:
    import llama_cpp
    if fault == "segv":
        def eval(self, tokens):
            # A real fault in the calling thread, as the AMX kernel's was: os.kill would signal the process, and
            # while the kernel woke another thread to take it, this one could go on and fail otherwise.
            import ctypes
            ctypes.string_at(0)
        llama_cpp.Llama.eval = eval
    elif fault == "nan":
        import ctypes
        def nan_logits(ctx, i):  # a backend that computes garbage: every logit NaN
            vocab = llama_cpp.llama_model_get_vocab(llama_cpp.llama_get_model(ctx))
            row = (ctypes.c_float * llama_cpp.llama_vocab_n_tokens(vocab))(float("nan"))
            for j in range(len(row)):
                row[j] = float("nan")
            nan_logits.keep = row
            return ctypes.cast(row, ctypes.POINTER(ctypes.c_float))
        llama_cpp.llama_get_logits_ith = nan_logits
"""


def test_the_record_keeps_what_earlier_stages_wrote(tmp_path):
    record = StartupRecord(tmp_path / "startup.json")
    assert record.read() is None
    record.write(LOADING, model="m.gguf")
    record.write(LOADING, cpu_features=["AVX2"], extra_buffers=True, extra_buffers_reason="on (auto)")
    record.write(PROVING)
    got = record.read()
    assert (got["stage"], got["model"], got["cpu_features"]) == (PROVING, "m.gguf", ["AVX2"])
    record.write(READY)
    assert record.read()["stage"] == READY


def test_the_failure_line_says_what_ran_and_what_to_try():
    base = {
        "stage": PROVING,
        "model": "m.gguf",
        "llama_cpp_python": "0.3.36",
        "cpu_features": ["AVX2", "AVX512", "AMX_INT8"],
    }
    line = failure_line(
        {**base, "extra_buffers": True, "extra_buffers_reason": "on (DECISION_ADAPTER_EXTRA_BUFFERS=on)"}
    )
    assert "\n" not in line
    for needle in (
        "first forward pass",
        "m.gguf",
        "0.3.36",
        "AVX2 AVX512 AMX_INT8",
        "DECISION_ADAPTER_EXTRA_BUFFERS=off",
    ):
        assert needle in line
    off = failure_line({**base, "extra_buffers": False, "extra_buffers_reason": "off (auto: ...)"})
    assert "already off" in off and "portable" in off
    assert "while llama.cpp loaded the model" in failure_line({**base, "stage": LOADING})


def _watch_until_exit(server, timeout_s: float = 90.0) -> list:
    """Every /ping status seen until the server exits (the test fails if it never does)."""
    seen = []
    deadline = time.monotonic() + timeout_s
    while server.process.poll() is None:
        assert time.monotonic() < deadline, f"the adapter kept running:\n{server.log_tail()}"
        seen.append(server.ping())
        time.sleep(0.02)
    return seen


@pytest.mark.slow
def test_a_worker_that_dies_on_its_first_forward_pass_never_reports_ready(model_dir, start_adapter, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(FAULTS)
    server = start_adapter(
        model_dir, wait=False, PYTHONPATH=tmp_path, TEST_FORWARD_PASS_FAULT="segv", DECISION_ADAPTER_EXTRA_BUFFERS="on"
    )
    seen = _watch_until_exit(server)
    log = server.log_path.read_text()
    assert 200 not in seen
    assert server.process.returncode != 0
    assert "SIGSEGV" in log, log  # gunicorn saw the worker die by the signal, not by an exception
    lines = [line for line in log.splitlines() if "decision adapter did not start" in line]
    assert len(lines) == 1, log  # one clear line, and no second worker booted to die the same way
    assert "first forward pass" in lines[0] and "DECISION_ADAPTER_EXTRA_BUFFERS=off" in lines[0]
    assert model_dir.joinpath(lines[0].split(" on ")[1].split(";")[0]).exists()  # names the model file
    assert log.count("Booting worker") == 1


@pytest.mark.slow
def test_a_forward_pass_that_returns_nan_stops_the_server_before_ready(model_dir, start_adapter, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(FAULTS)
    server = start_adapter(model_dir, wait=False, PYTHONPATH=tmp_path, TEST_FORWARD_PASS_FAULT="nan")
    seen = _watch_until_exit(server)
    log = server.log_path.read_text()
    assert 200 not in seen and server.process.returncode != 0
    assert "start-up decision returned unusable probabilities" in log


@pytest.mark.slow
def test_ping_reports_the_start_up_proof_and_the_extra_buffer_choice(model_dir, start_adapter):
    import json
    import urllib.request

    for mode, expected in (("off", False), ("on", True)):
        server = start_adapter(model_dir, DECISION_ADAPTER_EXTRA_BUFFERS=mode)
        with urllib.request.urlopen(server.url + "/status", timeout=5) as response:
            ping = json.loads(response.read())
        assert ping["extra_buffer_types"] is expected
        assert ping["startup_probe"]["input_tokens"] > 0 and ping["startup_probe"]["options"] == 16
        log = server.log_path.read_text()
        assert f"extra buffer types: {mode} (DECISION_ADAPTER_EXTRA_BUFFERS={mode})" in log
        assert "start-up decision scored" in log
        server.stop()


# -- GPU honesty: a GPU endpoint never serves from its CPU ----------------------------------------

GPU_REPORTED = """
import llama_cpp
llama_cpp.llama_supports_gpu_offload = lambda: True  # as a CUDA build would answer
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SM_LLAMA_CPP_N_GPU_LAYERS", "SEMIF_N_GPU_LAYERS"])
def test_gpu_layers_without_a_gpu_backend_refuse_to_start(model_dir, start_adapter, name):
    # AdapterProcess sets SM_LLAMA_CPP_N_GPU_LAYERS=0 for local runs; empty is unset.
    server = start_adapter(model_dir, wait=False, **{"SM_LLAMA_CPP_N_GPU_LAYERS": "", name: "-1"})
    seen = _watch_until_exit(server)
    log = server.log_path.read_text()
    assert 200 not in seen and server.process.returncode != 0
    assert "GPU offload is requested" in log and "loaded no GPU backend" in log
    assert "must not serve from its CPU" in log


@pytest.mark.slow
def test_a_gpu_backend_that_offloads_nothing_is_refused_too(model_dir, start_adapter, tmp_path):
    """The backend says it can offload (simulated), but llama.cpp's own load log reports no layer on a GPU."""
    (tmp_path / "sitecustomize.py").write_text(GPU_REPORTED)
    server = start_adapter(model_dir, wait=False, PYTHONPATH=tmp_path, SM_LLAMA_CPP_N_GPU_LAYERS="999")
    seen = _watch_until_exit(server)
    log = server.log_path.read_text()
    assert 200 not in seen and server.process.returncode != 0
    assert "llama.cpp offloaded none of" in log


@pytest.mark.slow
def test_a_cpu_endpoint_reports_what_llama_cpp_offloaded(adapter):
    from workshop_lib import examples
    from workshop_lib.client import EndpointClient

    model = EndpointClient.local(adapter.url).decide(examples.SUPPORT_ROUTE).model
    assert model["gpu_offload_supported"] is False and model["gpu_layers_offloaded"] == 0
    assert "llama.cpp offloaded 0/" in adapter.log_path.read_text()


# -- the model files a real adapter accepts (issues #24, #25) -------------------------------------
# The model directories hold a hard link to the session's GGUF (the embedded model as packaged), not
# a copy; a symlink would lead out of the directory, which is itself one of the refused cases.

SAMPLE_GGUF = {"repo": "sample/SmolLM2-GGUF", "revision": "0123456789abcdef0123456789abcdef01234567"}
SAMPLE_TOKENIZER = {"repo": "sample/SmolLM2", "revision": "fedcba9876543210fedcba9876543210fedcba98"}


def _gguf_of(model_dir):
    return next(model_dir.glob("*.gguf"))


def _sample_dir(model_dir, target, *, sha256=None, link=os.link):
    """A directory as the published sample's package unpacks: the GGUF at the root, tokenizer/ files,
    and a manifest of the sample's shape."""
    source = _gguf_of(model_dir)
    (target / "tokenizer").mkdir(parents=True)
    link(source, target / source.name)
    (target / "tokenizer" / "tokenizer_config.json").write_text("{}")
    manifest = {
        "gguf": {**SAMPLE_GGUF, "file": source.name, "sha256": sha256 or EMBEDDED_MODEL.gguf.sha256},
        "tokenizer": SAMPLE_TOKENIZER,
    }
    (target / "model-manifest.json").write_text(json.dumps(manifest))
    return target


def _refusal(server, timeout_s: float = 60.0) -> str:
    """The one CRITICAL line of an adapter that must not start (never healthy, non-zero exit)."""
    seen = _watch_until_exit(server, timeout_s)
    log = server.log_path.read_text(errors="replace")
    assert 200 not in seen and server.process.returncode not in (None, 0), log
    critical = [line for line in log.splitlines() if " CRITICAL " in line]
    assert len(critical) == 1 and "Traceback" not in log, log
    return critical[0]


@pytest.mark.slow
def test_the_published_samples_package_is_served_and_described_as_loaded(model_dir, start_adapter, tmp_path):
    from workshop_lib import examples
    from workshop_lib.client import EndpointClient

    sample = _sample_dir(model_dir, tmp_path / "sample")
    server = start_adapter(sample)
    model = EndpointClient.local(server.url).decide(examples.SUPPORT_ROUTE).model
    assert model["sha256"] == hashlib.sha256(_gguf_of(sample).read_bytes()).hexdigest()
    assert model["manifest_verified"] is True and model["file"] == EMBEDDED_MODEL.gguf.path
    assert (model["source_repo"], model["source_revision"]) == (SAMPLE_GGUF["repo"], SAMPLE_GGUF["revision"])
    log = server.log_path.read_text()
    assert (
        "manifest: published sample's shape, GGUF sha256 verified; tokenizer files not listed with digests "
        f"(1 under tokenizer/ from {SAMPLE_TOKENIZER['repo']}@{SAMPLE_TOKENIZER['revision'][:12]}"
    ) in log


@pytest.mark.slow
def test_the_workshop_package_says_its_shape(adapter):
    assert "manifest: workshop shape, 1 files verified (size and sha256)" in adapter.log_path.read_text()


@pytest.mark.slow
def test_a_sample_manifest_with_a_tampered_digest_stops_the_adapter(model_dir, start_adapter, tmp_path):
    sample = _sample_dir(model_dir, tmp_path / "sample", sha256="ab" * 32)
    line = _refusal(start_adapter(sample, wait=False))
    assert (
        f"{EMBEDDED_MODEL.gguf.path}: sha256 mismatch: expected {'ab' * 32}, actual {EMBEDDED_MODEL.gguf.sha256}"
        in line
    )


def _workshop_dir(model_dir, target, edit=None):
    """The workshop's package (hard-linked GGUF, a manifest copy of the test's own), its manifest edited."""
    target.mkdir(parents=True)
    os.link(_gguf_of(model_dir), target / _gguf_of(model_dir).name)
    manifest = json.loads((model_dir / "model-manifest.json").read_text())
    if edit:
        edit(manifest, target)
    (target / "model-manifest.json").write_text(json.dumps(manifest))
    return target


def _listed(manifest):
    return manifest["files"][0]


def _duplicate(manifest, target):
    manifest["files"].append(dict(_listed(manifest), sha256="cd" * 32))


def _passwd(manifest, target):
    manifest["files"].append(dict(_listed(manifest), path="../../etc/passwd"))


def _absolute(manifest, target):
    manifest["files"].append(dict(_listed(manifest), path="/etc/passwd"))


def _escaping_link(manifest, target):
    outside = target.parent / "outside.txt"
    outside.write_text("outside")
    (target / "notes.txt").symlink_to(outside)
    manifest["files"].append(
        dict(_listed(manifest), path="notes.txt", size=7, sha256=hashlib.sha256(b"outside").hexdigest())
    )


def _wrong_size(manifest, target):
    _listed(manifest)["size"] += 1


def _malformed(manifest, target):
    manifest["files"].append({"path": "tokenizer.json", "size": "12", "sha256": "0" * 64})


BENT = [
    pytest.param(_duplicate, r"lists '.*\.gguf' twice \(files\[0\] and files\[1\]\)", id="two-entries-for-the-gguf"),
    pytest.param(_passwd, r"files\[1\]: the path '\.\./\.\./etc/passwd' leaves the model directory", id="dotdot"),
    pytest.param(_absolute, r"files\[1\]: the path '/etc/passwd' is absolute", id="absolute"),
    pytest.param(
        _escaping_link,
        r"files\[1\] \('notes\.txt'\): .*outside\.txt, outside the model directory",
        id="symlink-escaping",
    ),
    pytest.param(_wrong_size, r"size \d+ bytes does not match the manifest's \d+ bytes", id="wrong-size"),
    pytest.param(_malformed, r"files\[1\] \('tokenizer\.json'\): size must be a non-negative integer", id="malformed"),
]


@pytest.mark.slow
@pytest.mark.parametrize("edit, needle", BENT)
def test_a_bent_manifest_stops_the_adapter_with_one_line_naming_the_entry(
    model_dir, start_adapter, tmp_path, edit, needle
):
    line = _refusal(start_adapter(_workshop_dir(model_dir, tmp_path / "model", edit), wait=False))
    assert re.search(needle, line), line


@pytest.mark.slow
def test_sm_llama_cpp_model_outside_the_directory_is_refused_despite_a_same_named_listed_file(
    model_dir, start_adapter, tmp_path
):
    served = _workshop_dir(model_dir, tmp_path / "model")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    impostor = elsewhere / _gguf_of(model_dir).name  # a GGUF of the same name, not the one verified
    impostor.write_bytes(_gguf_of(model_dir).read_bytes()[:4096])
    line = _refusal(start_adapter(served, wait=False, SM_LLAMA_CPP_MODEL=str(impostor)))
    assert "SM_LLAMA_CPP_MODEL" in line and "outside the model directory" in line and str(impostor) in line


@pytest.mark.slow
def test_a_gguf_symlinked_from_outside_is_refused(model_dir, start_adapter, tmp_path):
    sample = _sample_dir(model_dir, tmp_path / "sample", link=lambda source, target: target.symlink_to(source))
    line = _refusal(start_adapter(sample, wait=False))
    assert "the GGUF found" in line and "outside the model directory" in line
