"""Jev's System One API: lives in ``apis/systemone.py``; this name stays for its callers."""

from .apis.systemone import *  # noqa: F401,F403
from .apis.systemone import _DEFAULT_QUESTION, JEV_PROMPT_VERSION  # noqa: F401
