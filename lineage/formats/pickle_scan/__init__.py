"""The static pickle scanner (lineage.formats.pickle_scan.scan describes it)."""

from lineage.formats.pickle_scan import scan as _scan
from lineage.formats.pickle_scan.scan import *  # noqa: F403
from lineage.formats.pickle_scan.scan import SNIFF_WINDOW, may_be_pickle, pickle_kind_of  # noqa: F401

__doc__ = _scan.__doc__
