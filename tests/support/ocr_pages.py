"""Generated scans: pages of known text rendered with Pillow, for the OCR tests and benchmark.

Nothing is downloaded: the text comes from a seeded generator over a fixed word
list, the fonts are Debian's DejaVu set (`fonts-dejavu-core`, installed by
.ci/run), and the "scanner" is a handful of Pillow operations — a small rotation,
a blur, speckle noise and a low JPEG quality — so every page's true text is
known and a character error rate can be computed.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
FONTS = ("DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf", "DejaVuSansCondensed.ttf")

WORDS = (
    "the of and to in is was for on that with as by at from this have are which or be not an "
    "report water river garden window letter market winter summer station engine paper library "
    "morning evening village harbour bridge council meeting budget invoice delivery customer "
    "account balance quarter figure table chapter section result method sample measure "
    "temperature pressure velocity distance weight height volume energy battery circuit signal "
    "north south east west mountain valley forest island coast desert field orchard farmer "
    "teacher student doctor nurse pilot sailor baker carpenter painter writer reader visitor "
    "yellow purple orange silver golden copper marble granite velvet cotton linen leather "
    "quickly slowly carefully gently loudly quietly early later often seldom always never "
    "building kitchen cellar attic garage stairway corridor balcony chimney fountain lantern "
    "agreement contract schedule warranty receipt payment transfer deposit pension salary"
).split()


@dataclass(frozen=True)
class PageSpec:
    """How one page looks: font, text size, and what the "scanner" did to it."""

    font: str = FONTS[0]
    size: int = 28  # pixels per em at the page's resolution
    rotate: float = 0.0  # degrees, counter-clockwise
    blur: float = 0.0  # Gaussian radius in pixels
    noise: float = 0.0  # fraction of pixels flipped to random grey
    jpeg_quality: int | None = None  # re-encode once at this quality
    width: int = 1240  # A4 at 150 dpi
    height: int = 1754


@dataclass(frozen=True)
class RenderedPage:
    image: Image.Image  # greyscale ("L")
    text: str  # the true text, one rendered line per line
    spec: PageSpec


def page_text(seed: int, lines: int = 12, words_per_line: int = 9) -> list[str]:
    """Deterministic lines of plausible words with a number and punctuation here and there."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        words = [rng.choice(WORDS) for _ in range(words_per_line)]
        if rng.random() < 0.5:
            words[rng.randrange(len(words))] = str(rng.randint(2, 9999))
        words[0] = words[0].capitalize()
        line = " ".join(words)
        out.append(line + rng.choice((".", ",", ";", ":", "")))
    return out


def font(name: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONT_DIR / name), size)


def render_lines(lines: list[str], spec: PageSpec = PageSpec()) -> RenderedPage:
    """Draw `lines` on a white page with `spec`'s font, then apply its degradations."""
    face = font(spec.font, spec.size)
    page = Image.new("L", (spec.width, spec.height), 255)
    draw = ImageDraw.Draw(page)
    margin = spec.width // 12
    y = margin
    step = int(spec.size * 1.6)
    kept: list[str] = []
    for line in lines:
        # keep each line within the page: drop trailing words that do not fit
        words = line.split()
        while words and draw.textlength(" ".join(words), font=face) > spec.width - 2 * margin:
            words.pop()
        if not words or y + step > spec.height - margin:
            break
        text = " ".join(words)
        draw.text((margin, y), text, font=face, fill=0)
        kept.append(text)
        y += step
    image = degrade(page, spec)
    return RenderedPage(image, "\n".join(kept), spec)


def degrade(page: Image.Image, spec: PageSpec) -> Image.Image:
    image = page
    if spec.rotate:
        image = image.rotate(spec.rotate, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=255)
    if spec.blur:
        image = image.filter(ImageFilter.GaussianBlur(spec.blur))
    if spec.noise:
        rng = random.Random(int(spec.noise * 1e6) + spec.size)
        pixels = image.load()
        assert pixels is not None
        count = int(image.width * image.height * spec.noise)
        for _ in range(count):
            pixels[rng.randrange(image.width), rng.randrange(image.height)] = rng.randrange(256)
    if spec.jpeg_quality is not None:
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=spec.jpeg_quality)
        image = Image.open(io.BytesIO(buffer.getvalue())).convert("L")
    return image


def render_page(seed: int, spec: PageSpec = PageSpec(), lines: int = 12) -> RenderedPage:
    return render_lines(page_text(seed, lines), spec)


# --- conditions the benchmark reports on ---------------------------------

CLEAN = {
    "clean sans 28px": PageSpec(FONTS[0], 28),
    "clean serif 24px": PageSpec(FONTS[1], 24),
    "clean mono 22px": PageSpec(FONTS[2], 22),
    "clean condensed 34px": PageSpec(FONTS[3], 34),
}
NOISY = {
    "rotated 3°": PageSpec(FONTS[0], 28, rotate=3.0),
    "rotated -2° serif": PageSpec(FONTS[1], 26, rotate=-2.0),
    "blurred r=1.2": PageSpec(FONTS[0], 28, blur=1.2),
    "JPEG q=25 + speckle": PageSpec(FONTS[1], 26, noise=0.01, jpeg_quality=25),
    "rotated 1.5° + blur + JPEG q=40": PageSpec(FONTS[3], 30, rotate=1.5, blur=0.8, jpeg_quality=40),
}


# --- files ----------------------------------------------------------------


def save_image(image: Image.Image, path: Path) -> Path:
    """Save in the format the suffix names (PNG, JPEG, TIFF, WebP, BMP, GIF)."""
    fmt = {".jpg": "JPEG", ".jpeg": "JPEG", ".tif": "TIFF", ".tiff": "TIFF", ".webp": "WEBP",
           ".png": "PNG", ".bmp": "BMP", ".gif": "GIF"}[path.suffix.lower()]
    options = {"quality": 90} if fmt in ("JPEG", "WEBP") else {}
    image.save(path, fmt, **options)
    return path


def save_multipage(images: list[Image.Image], path: Path) -> Path:
    """A multi-page TIFF, or an image-only PDF (no text layer) when the suffix is .pdf."""
    # copies: Pillow's PDF writer leaves encoder settings on the images it saved
    # (`encoderconfig`), which would break a later TIFF save of the same images
    first, rest = images[0].copy(), [im.copy() for im in images[1:]]
    if path.suffix.lower() == ".pdf":
        first.save(path, "PDF", save_all=True, append_images=rest, resolution=150.0)
    else:
        first.save(path, "TIFF", save_all=True, append_images=rest, compression="tiff_deflate")
    return path
