#!/usr/bin/env bash
# The llama.cpp DLC's registry account for a region (AWS DLC "available images" list):
#   dlc_account.sh REGION  ->  prints the 12-digit account
# The image build takes the account from this table, never from the image reference it is given,
# so a look-alike registry cannot receive the ECR login. tests/container/test_buildspecs.py keeps it equal to
# workshop_lib/aws/images.py DLC_ACCOUNTS.
set -euo pipefail
region="${1:?usage: dlc_account.sh REGION}"
[[ "$region" =~ ^[a-z]{2}(-[a-z]+)+-[0-9]$ ]] || { echo "ERROR: $region is not a region name" >&2; exit 1; }
case "$region" in
  af-south-1) echo 626614931356 ;;
  ap-east-1) echo 871362719292 ;;
  ap-east-2) echo 975050140332 ;;
  ap-south-2) echo 772153158452 ;;
  ap-southeast-3) echo 907027046896 ;;
  ap-southeast-4) echo 457447274322 ;;
  ap-southeast-5) echo 550225433462 ;;
  ap-southeast-6) echo 633930458069 ;;
  ap-southeast-7) echo 590183813437 ;;
  ap-northeast-3) echo 364406365360 ;;
  ca-west-1) echo 204538143572 ;;
  eu-south-1) echo 692866216735 ;;
  eu-south-2) echo 503227376785 ;;
  eu-central-2) echo 380420809688 ;;
  il-central-1) echo 780543022126 ;;
  mx-central-1) echo 637423239942 ;;
  me-south-1) echo 217643126080 ;;
  me-central-1) echo 914824155844 ;;
  me-west-1) echo 124382933778 ;;
  cn-north-1|cn-northwest-1) echo 727897471807 ;;
  us-gov-*|us-iso*|eu-iso*) echo "ERROR: AWS publishes no llama.cpp DLC in $region" >&2; exit 1 ;;
  *) echo 763104351884 ;;
esac
