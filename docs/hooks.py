"""MkDocs hook: each page's `<!-- reference: NAME -->` marker becomes the reference generated from the registries or
the parser (`fwsapp.cli.reference`), so the site's tables are never kept by hand."""
from fwsapp.cli.reference import filled


def on_page_markdown(markdown, **_):
    return filled(markdown)
