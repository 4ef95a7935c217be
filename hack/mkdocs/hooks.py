"""MkDocs hooks for the capx docs site (mkdocs.yml names this file under `hooks:`).

MkDocs 1.4 (Debian's) only logs an INFO line for a page that exists under docs/ but is missing
from `nav`, so `mkdocs build --strict` would pass with pages nobody can reach. This hook turns
each such page into a WARNING that names the page and says where to add it; --strict then
fails the build on it.
"""

import logging
import os

log = logging.getLogger("mkdocs.plugins.capx")


def _src(f):
    # src_uri arrived in MkDocs 1.5; 1.4 has only the OS path.
    return getattr(f, "src_uri", None) or f.src_path.replace(os.sep, "/")


def _nav_paths(items):
    for item in items:
        if getattr(item, "is_page", False):
            yield _src(item.file)
        children = getattr(item, "children", None)
        if children:
            yield from _nav_paths(children)


def on_nav(nav, config, files):
    in_nav = set(_nav_paths(nav.items))
    missing = sorted(
        _src(f) for f in files.documentation_pages() if _src(f) not in in_nav
    )
    for page in missing:
        log.warning(
            "docs/%s is not in the navigation: add it to `nav` in mkdocs.yml "
            "(every page must be reachable from the site's menu)",
            page,
        )
    return nav


# Air-gapped operators open the site without the internet: a page that asks a third party for
# anything (Google Fonts is the theme's default) stalls or leaks their visit. theme.font: false
# turns the fonts off; this fails the build if any built file still names such a host.
_THIRD_PARTY = ("fonts.googleapis.com", "fonts.gstatic.com")


def on_post_build(config):
    site = config["site_dir"]
    for dirpath, _, names in os.walk(site):
        for name in names:
            if not name.endswith((".html", ".css", ".js")):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for host in _THIRD_PARTY:
                if host in text:
                    raise SystemExit(
                        "%s asks %s: the site must load nothing from third parties "
                        "(theme.font: false in mkdocs.yml)" % (os.path.relpath(path, site), host)
                    )
