"""`compare data make DIR --learnable`: images whose class a network can tell apart, for time to
accuracy (docs/accuracy.md), written as DIR/train and DIR/val in the ImageNet layout.

Class k is a combination of three attributes: a hue (HUES bins round the colour wheel), a shape
(SHAPES) and a texture (TEXTURES), k -> (k mod 10, (k + k div 10) mod 5, (k + k div 50) mod 4):
every class of the first 200 has a combination of its own (MAX_CLASSES: more are refused), and
neighbouring classes differ in all three. Every image draws the object's position, size,
rotation, hue, saturation and brightness with jitter, over a background of a random colour
gradient with a cast of the class's colour, and adds pixel noise; so each class is a
distribution, not a template, and a crop that cuts the object still shows its colour and
texture. Image i of a part depends only on (seed, part, i): deterministic.
"""
import io
from dataclasses import dataclass
from typing import Dict, List, Tuple

from .errors import UserError
from .imagegen import class_name

HUES = 10
SHAPES = ("disc", "square", "triangle", "ring", "cross")
TEXTURES = ("solid", "stripes", "checks", "dots")
MAX_CLASSES = HUES * len(SHAPES) * len(TEXTURES)  # the combinations: class k + 200 draws as k
PARTS = ("train", "val")
# the sizes `--learnable NAME` makes: (classes, train images per class, val images per class)
PRESETS: Dict[str, Tuple[int, int, int]] = {
    "small": (10, 48, 20),    # a CPU: ResNet-50 at 64x64 reaches 0.9 top-1 in a few epochs
    "large": (100, 200, 30),  # one H200: 20,000 training images, an epoch in seconds
}
CAST = 0.25  # how much of the class's colour the background takes on
SIDE = 80  # pixels: the 64x64 training crops and the 73 -> 64 evaluation crop come from it


@dataclass(frozen=True)
class LearnableSpec:
    classes: int = 10
    train_per_class: int = 48
    val_per_class: int = 20
    side: int = SIDE
    seed: int = 1234
    quality: int = 90
    learnable: int = 1  # make.json says which generator wrote the folder

    def __post_init__(self):
        if self.classes > MAX_CLASSES:  # two folders of one distribution: top-1 capped below 1
            raise UserError("--classes {}: --learnable draws at most {} classes a network can "
                            "tell apart ({} hues x {} shapes x {} textures); give --classes {} "
                            "or fewer".format(self.classes, MAX_CLASSES, HUES, len(SHAPES),
                                              len(TEXTURES), MAX_CLASSES))

    @property
    def images(self) -> int:
        return self.classes * (self.train_per_class + self.val_per_class)

    def folders(self) -> List[str]:
        return ["{}/{}".format(part, class_name(k)) for part in PARTS for k in range(self.classes)]

    def where(self, i: int) -> Tuple[str, int, int]:
        """Image i of the whole folder -> (part, class, index within the part)."""
        train = self.classes * self.train_per_class
        part, j = ("train", i) if i < train else ("val", i - train)
        return part, j % self.classes, j

    def path(self, i: int) -> str:
        part, k, j = self.where(i)
        return "{}/{}/{:08d}.JPEG".format(part, class_name(k), j)

    def render(self, i: int) -> bytes:
        part, k, j = self.where(i)
        return render(self, k, PARTS.index(part), j)


def attributes(k: int) -> Tuple[int, str, str]:
    """(hue bin, shape, texture) of class k."""
    return k % HUES, SHAPES[(k + k // HUES) % len(SHAPES)], TEXTURES[(k + k // 50) % len(TEXTURES)]


def _mask(shape: str, u, v, size: float):
    """Where the object is: u, v are coordinates relative to its centre, rotated."""
    import numpy as np
    r = np.hypot(u, v)
    if shape == "disc":
        return r < size
    if shape == "ring":
        return (r < size) & (r > 0.55 * size)
    if shape == "square":
        return (np.abs(u) < 0.85 * size) & (np.abs(v) < 0.85 * size)
    if shape == "cross":
        bar = 0.3 * size
        return ((np.abs(u) < bar) & (np.abs(v) < size)) | ((np.abs(v) < bar) & (np.abs(u) < size))
    return (v > -0.6 * size) & (v < size - 1.7 * np.abs(u))  # triangle, apex up


def _texture(texture: str, u, v, period: float):
    """1 where the object shows its own colour, 0 where a darker shade."""
    import numpy as np
    if texture == "stripes":
        return (np.floor(u / period) % 2) == 0
    if texture == "checks":
        return ((np.floor(u / period) + np.floor(v / period)) % 2) == 0
    if texture == "dots":
        return np.hypot((u % period) - period / 2, (v % period) - period / 2) > period / 3
    return np.ones_like(u, dtype=bool)


def _hsv(h: float, s: float, v: float):
    import colorsys

    import numpy as np
    return np.array(colorsys.hsv_to_rgb(h % 1.0, s, v)) * 255.0


def render(spec: LearnableSpec, k: int, part: int, j: int) -> bytes:
    """The JPEG bytes of image j of class k in part `part` (0 train, 1 val)."""
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng([spec.seed, part, j, 17])
    n = spec.side
    hue_bin, shape, texture = attributes(k)
    y, x = (np.mgrid[0:n, 0:n] + 0.5) / n
    # background: a gradient between two random dull colours
    a, b = (_hsv(rng.uniform(), rng.uniform(0, 0.35), rng.uniform(0.25, 0.8)) for _ in range(2))
    angle = rng.uniform(0, 2 * np.pi)
    t = np.clip(0.5 + (np.cos(angle) * (x - 0.5) + np.sin(angle) * (y - 0.5)), 0, 1)[..., None]
    # the object: its class's hue, shape and texture, each drawn with jitter; large, so that
    # most random-resized crops (8 % of the image and up) still hold some of it
    colour = _hsv((hue_bin + rng.uniform(-0.25, 0.25)) / HUES, rng.uniform(0.65, 1.0),
                  rng.uniform(0.7, 1.0))
    pixels = (a * (1 - t) + b * t) * (1 - CAST) + CAST * colour  # a cast of the class's hue
    cx, cy = rng.uniform(0.38, 0.62, size=2)
    size = rng.uniform(0.3, 0.45)
    rot = rng.uniform(0, 2 * np.pi)
    du, dv = x - cx, y - cy
    u, v = np.cos(rot) * du + np.sin(rot) * dv, -np.sin(rot) * du + np.cos(rot) * dv
    inside = _mask(shape, u, v, size)
    lit = _texture(texture, u, v, rng.uniform(0.06, 0.1))
    pixels = np.where((inside & lit)[..., None], colour, pixels)
    pixels = np.where((inside & ~lit)[..., None], colour * 0.45, pixels)
    pixels = pixels + rng.normal(0, 18, size=pixels.shape)
    out = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(out, "JPEG",
                                                                   quality=spec.quality)
    return out.getvalue()
