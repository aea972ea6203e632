"""Site files: one TOML file per site, validated once into typed, frozen objects.

``load_sites()`` / ``check_sites()`` read the files bundled in this package plus any folder named
by ``WEBCRAWL_SITES_DIR``; ``parse_site()`` validates one document. Any problem is a
:class:`SiteConfigError` naming the file, the field, the bad value and what was expected.
The format is documented in docs/sites.md.
"""

from __future__ import annotations

from webcrawl.sites.errors import SiteConfigError
from webcrawl.sites.load import (
    SiteFile,
    bundled_site_files,
    check_sites,
    load_site_file,
    load_sites,
    parse_site,
    site_from_dict,
    sites_dirs,
)
from webcrawl.sites.schema import (
    Budget,
    FieldRule,
    Limits,
    ListingRule,
    PageType,
    Politeness,
    Reserves,
    SiteConfig,
    Trust,
    TrustRule,
)

__all__ = [
    "Budget",
    "FieldRule",
    "Limits",
    "ListingRule",
    "PageType",
    "Politeness",
    "Reserves",
    "SiteConfig",
    "SiteConfigError",
    "SiteFile",
    "Trust",
    "TrustRule",
    "bundled_site_files",
    "check_sites",
    "load_site_file",
    "load_sites",
    "parse_site",
    "site_from_dict",
    "sites_dirs",
]
