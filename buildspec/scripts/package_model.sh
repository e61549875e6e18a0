#!/usr/bin/env bash
# Package the pinned model: download exactly the pinned revisions from the
# Hugging Face hub, check the GGUF's size and sha256, record every file's size
# and sha256 in model-manifest.json, and write model.tar.gz with the GGUF at
# the archive root. Any mismatch exits non-zero before a tarball exists.
#
#   package_model.sh OUT_DIR   ->  OUT_DIR/model.tar.gz, OUT_DIR/model-manifest.json
#
# Inputs (environment; buildspec/model-package.yml sets them):
#   GGUF_REPO GGUF_REVISION GGUF_FILE GGUF_SIZE GGUF_SHA256
#   TOKENIZER_REPO TOKENIZER_REVISION TOKENIZER_PATTERNS (space-separated globs, may be empty):
#     every top-level file of the repo at that revision whose name matches one of them
#   MODEL_NAME MODEL_QUANTIZATION MODEL_LICENSE
#   HF_ENDPOINT (default https://huggingface.co), LLAMA_CPP_DLC (JSON, recorded only)
#   CALIBRATION_S3_URI (optional): a calibration.json (`workshop calibrate`) fitted for this GGUF,
#     packaged next to it and listed in the manifest; one fitted for another GGUF fails the build
set -euo pipefail
umask 022

out_dir="${1:?usage: package_model.sh OUT_DIR}"
: "${GGUF_REPO:?}" "${GGUF_REVISION:?}" "${GGUF_FILE:?}" "${GGUF_SIZE:?}" "${GGUF_SHA256:?}"
: "${MODEL_NAME:?}" "${MODEL_QUANTIZATION?}" "${MODEL_LICENSE?}"
hub="${HF_ENDPOINT:-https://huggingface.co}"
hub="${hub%/}"
read -r -a tokenizer_patterns <<< "${TOKENIZER_PATTERNS:-}"
if ((${#tokenizer_patterns[@]})); then
  : "${TOKENIZER_REPO:?}" "${TOKENIZER_REVISION:?}"
fi

files_dir="$out_dir/files"
rm -rf "$files_dir" "$out_dir/model.tar.gz" "$out_dir/model-manifest.json"
mkdir -p "$files_dir"

fail() {
  echo "ERROR: $*" >&2
  exit 1
}

# download REPO REVISION FILE: exactly that revision, via the hub's resolve URL.
download() {
  local url="$hub/$1/resolve/$2/$3"
  echo "downloading $1@${2:0:12} $3"
  curl --fail --location --silent --show-error --retry 5 --retry-delay 10 \
    --connect-timeout 30 --output "$files_dir/$3.part" "$url" \
    || fail "could not download $url"
  mv "$files_dir/$3.part" "$files_dir/$3"
}

# tokenizer_names: the repo's top-level files at the pinned revision that match a pattern (the hub's
# tree listing), each a plain file name; fails when the listing is unreadable or nothing matches.
tokenizer_names() {
  local url="$hub/api/models/$TOKENIZER_REPO/tree/$TOKENIZER_REVISION"
  curl --fail --location --silent --show-error --retry 5 --retry-delay 10 --connect-timeout 30 "$url" \
    | python3 -c '
import fnmatch, json, re, sys
patterns = sys.argv[1:]
try:
    entries = json.load(sys.stdin)
except ValueError:
    sys.exit("the tree listing is not JSON")
names = sorted(e["path"] for e in entries if isinstance(e, dict) and e.get("type") == "file"
               and any(fnmatch.fnmatchcase(e["path"], p) for p in patterns))
for name in names:
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        sys.exit(f"refusing the file name {name!r} from the listing")
    print(name)
' "${tokenizer_patterns[@]}" || fail "could not list $TOKENIZER_REPO@$TOKENIZER_REVISION ($url)"
}

download "$GGUF_REPO" "$GGUF_REVISION" "$GGUF_FILE"
tokenizer_files=()
if ((${#tokenizer_patterns[@]})); then
  names="$(tokenizer_names)"  # a failed listing ends the script here (set -e), with its own message
  [[ -z "$names" ]] || mapfile -t tokenizer_files <<< "$names"
  ((${#tokenizer_files[@]})) \
    || fail "no file of $TOKENIZER_REPO@$TOKENIZER_REVISION matches ${tokenizer_patterns[*]}; nothing was packaged"
  echo "tokenizer files matching ${tokenizer_patterns[*]}: ${tokenizer_files[*]}"
fi
for name in "${tokenizer_files[@]}"; do
  download "$TOKENIZER_REPO" "$TOKENIZER_REVISION" "$name"
done

gguf="$files_dir/$GGUF_FILE"
size="$(stat -c %s "$gguf")"
[[ "$size" == "$GGUF_SIZE" ]] \
  || fail "$GGUF_FILE is $size bytes, but $GGUF_REPO@$GGUF_REVISION pins $GGUF_SIZE bytes; nothing was packaged"
sha256="$(sha256sum "$gguf" | cut -d ' ' -f 1)"
[[ "$sha256" == "${GGUF_SHA256,,}" ]] \
  || fail "$GGUF_FILE has sha256 $sha256, but the pin is $GGUF_SHA256; nothing was packaged"
echo "verified $GGUF_FILE: $size bytes, sha256 $sha256"

calibration_files=()
if [[ -n "${CALIBRATION_S3_URI:-}" ]]; then
  aws s3 cp --only-show-errors "$CALIBRATION_S3_URI" "$files_dir/calibration.json"
  python3 - "$files_dir/calibration.json" "$sha256" <<'PY' || fail "$CALIBRATION_S3_URI cannot go into this package; nothing was packaged"
import json, sys
try:
    fitted = str((json.load(open(sys.argv[1], encoding="utf-8")).get("fit_for") or {}).get("gguf_sha256", ""))
except (ValueError, AttributeError):
    sys.exit("ERROR: calibration.json is not a calibration document (write it with `workshop calibrate`)")
if fitted.lower() != sys.argv[2]:
    sys.exit(f"ERROR: calibration.json was fitted for the GGUF with sha256 {fitted or '(none)'}, not {sys.argv[2]}")
PY
  calibration_files=(calibration.json)
  echo "calibration.json from $CALIBRATION_S3_URI, fitted for this GGUF"
fi

# The manifest, in the format of workshop_lib.packaging.build_manifest.
CALIBRATED="${#calibration_files[@]}" python3 - "$files_dir" "${tokenizer_files[@]}" > "$files_dir/model-manifest.json" <<'PY'
import datetime, hashlib, json, os, platform, subprocess, sys
from pathlib import Path

files_dir, tokenizer_names = Path(sys.argv[1]), sys.argv[2:]
env = os.environ

def measure(name):
    digest = hashlib.sha256()
    with open(files_dir / name, "rb") as handle:
        while block := handle.read(8 * 1024 * 1024):
            digest.update(block)
    return (files_dir / name).stat().st_size, digest.hexdigest()

entries = [(env["GGUF_FILE"], "gguf", env["GGUF_REPO"], env["GGUF_REVISION"])]
entries += [(name, "tokenizer", env["TOKENIZER_REPO"], env["TOKENIZER_REVISION"]) for name in tokenizer_names]
files = []
for path, role, repo, revision in entries:
    size, sha256 = measure(path)
    files.append({"path": path, "role": role, "repo": repo, "revision": revision, "size": size, "sha256": sha256})
if env.get("CALIBRATED") == "1":
    size, sha256 = measure("calibration.json")
    files.append({"path": "calibration.json", "role": "calibration", "size": size, "sha256": sha256})

curl = subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split()
tools = {"packager": "buildspec/model-package.yml", "python": platform.python_version(),
         "curl": curl[1] if len(curl) > 1 else "unknown"}
if json.loads(env.get("LLAMA_CPP_DLC") or "{}"):
    tools["llama_cpp_dlc"] = json.loads(env["LLAMA_CPP_DLC"])
if env.get("CODEBUILD_BUILD_IMAGE"):
    tools["codebuild_image"] = env["CODEBUILD_BUILD_IMAGE"]

now = datetime.datetime.now(datetime.timezone.utc)
build_id = env.get("CODEBUILD_BUILD_ID")
manifest = {
    "format": 1,
    "model": {"name": env["MODEL_NAME"], "repo": env["GGUF_REPO"], "revision": env["GGUF_REVISION"],
              "file": env["GGUF_FILE"], "quantization": env["MODEL_QUANTIZATION"],
              "license": env["MODEL_LICENSE"]},
    "files": files,
    "tools": tools,
    "build": {"id": build_id or f"local-{now:%Y%m%d%H%M%S}", "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
              "where": "codebuild" if build_id else "local"},
}
json.dump(manifest, sys.stdout, indent=2)
sys.stdout.write("\n")
PY

# gzip -1: GGUF weights barely compress, so spend little time trying.
tar --create --file=- --directory="$files_dir" --owner=0 --group=0 --numeric-owner \
  -- "$GGUF_FILE" "${tokenizer_files[@]}" "${calibration_files[@]}" model-manifest.json \
  | gzip -1 > "$out_dir/model.tar.gz.part"
mv "$out_dir/model.tar.gz.part" "$out_dir/model.tar.gz"
cp "$files_dir/model-manifest.json" "$out_dir/model-manifest.json"
echo "wrote $out_dir/model.tar.gz ($(stat -c %s "$out_dir/model.tar.gz") bytes) and model-manifest.json"
