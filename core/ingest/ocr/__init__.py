"""OCR: scanned PDF pages and images become text (see docs/ingestion.md, "OCR").

`options` holds what a caller decides (on/off, languages, limits, cache file),
`engine` runs Tesseract on one page, `cache` remembers recognised pages by content
hash, and `pages` turns images into recognised `Document`s under the limits.

Nothing is imported here: the runtime needs `options` alone, and must not load
Pillow for it.
"""
