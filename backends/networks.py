"""The networks compare trains, as data: one definition that every framework builds from.

Standard library only, Python >= 3.8: the host lists the networks (`compare list models`) and
counts their parameters and multiply-adds from these tables without importing a framework; each
backend's `models.py` builds them. The definitions are torchvision's (named per network below);
tf_cnn_benchmarks (seed 000) uses the same names, so its rows match by `model`.

Layer tables (the Inceptions): a conv is ("conv", out, (kh, kw), (sh, sw), (ph, pw)) without bias,
followed by batch norm (with scale) and ReLU; a pool is ("max" | "avg" | "avg_nopad", (kh, kw),
(sh, sw), (ph, pw)): "avg" counts the zero padding in its mean (PyTorch's count_include_pad=True),
"avg_nopad" only the real pixels (TensorFlow's "SAME"); ("concat", branches) applies each branch (a
tuple of layers) to the same input and concatenates the outputs along the channels.
"""
from collections import namedtuple
from typing import Dict, List, Tuple

Network = namedtuple("Network", "name title reference native quick unsupported")

# ResNet v1.5 bottleneck stages: (width, blocks, stride); the blocks differ per depth
RESNET_BLOCKS = {"resnet50": (3, 4, 6, 3), "resnet152": (3, 8, 36, 3)}
RESNET_EXPANSION = 4
# VGG-16 (configuration "D", no batch norm): 3x3 convs with bias and ReLU, "M" a 2x2 max pool
VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
VGG_POOL = 7  # adaptive average pooling to 7x7: the classifier's input at any image size
VGG_CLASSIFIER = (4096, 4096)  # hidden widths, each Linear + ReLU (dropout left out: see NOTES)
INCEPTION_BN_EPSILON = 1e-3  # torchvision's BasicConv2d; ResNet's BN keeps PyTorch's 1e-5

NETWORKS = (
    Network("resnet50", "ResNet-50 v1.5", "torchvision resnet50", 224, 64, ""),
    Network("resnet152", "ResNet-152 v1.5", "torchvision resnet152", 224, 64, ""),
    Network("inception3", "Inception-v3", "torchvision inception_v3(aux_logits=False)", 299, 75, ""),
    Network("inception4", "Inception-v4", "timm inception_v4", 299, 75, ""),
    Network("vgg16", "VGG-16", "torchvision vgg16", 224, 64, ""),
    Network("nasnet", "NASNet-A", "-", 224, 224,
            "nasnet is not implemented: NASNet-A's searched cells (separable convolutions, "
            "drop-path) have no definition shared by torchvision, Keras, Gluon and Flax, and "
            "compare does not define it itself yet; choose from resnet50, resnet152, inception3, "
            "inception4, vgg16"),
)
NOTES = {
    "resnet50": "stride on the 3x3 conv, no conv biases, last BN of each block starts at zero",
    "resnet152": "the ResNet-50 bottleneck code with blocks (3, 8, 36, 3)",
    "inception3": "no auxiliary head, BN with scale (gamma), eps 0.001; dropout left out",
    "vgg16": "adaptive average pool to 7x7 before the classifier; dropout left out",
    "inception4": "TF-slim's and tf_cnn_benchmarks' layout; BN with scale, eps 0.001, average "
                  "pools over the real pixels (timm's); dropout left out",
}
DROPOUT_NOTE = ("Dropout (torchvision: before Inception-v3's fc and in VGG-16's classifier; timm: "
                "before Inception-v4's) is left out in every framework: it has no parameters, and "
                "Flax's would need a random key threaded through the train step.")
_BY_NAME = {n.name: n for n in NETWORKS}


def names(supported_only: bool = True) -> List[str]:
    return [n.name for n in NETWORKS if not (supported_only and n.unsupported)]


def get(name: str) -> Network:
    """The network called `name`; KeyError with the valid names otherwise."""
    try:
        return _BY_NAME[str(name).strip().lower()]
    except KeyError:
        raise KeyError("unknown model {!r}; choose from {}".format(name, ", ".join(names(False))))


def why_not(name: str) -> str:
    """Why a backend does not build `name`: the network's recorded reason, or that it is unknown
    (with the names it does build)."""
    net = _BY_NAME.get(str(name).strip().lower())
    if net is not None and net.unsupported:
        return net.unsupported
    return "unknown model {!r}; choose from {}".format(name, ", ".join(names()))


def resnet_stages(name: str) -> Tuple[Tuple[int, int, int], ...]:
    """((width, blocks, stride), ...) of the four bottleneck stages of resnet50 or resnet152."""
    return tuple(zip((64, 128, 256, 512), RESNET_BLOCKS[name], (1, 2, 2, 2)))


def _pair(x) -> Tuple[int, int]:
    return (x, x) if isinstance(x, int) else tuple(x)


def conv(out: int, kernel, stride=1, padding=0) -> tuple:
    return ("conv", out, _pair(kernel), _pair(stride), _pair(padding))


MAX3 = ("max", (3, 3), (2, 2), (0, 0))
AVG3 = ("avg", (3, 3), (1, 1), (1, 1))
AVG3_NOPAD = ("avg_nopad", (3, 3), (1, 1), (1, 1))
ROW7, COL7 = dict(padding=(0, 3)), dict(padding=(3, 0))  # 1x7 and 7x1 convs keep the size


def _fork(out: int) -> tuple:
    """A 1x3 and a 3x1 conv on the same input, concatenated."""
    return ("concat", ((conv(out, (1, 3), padding=(0, 1)),), (conv(out, (3, 1), padding=(1, 0)),)))


def _a(pool: int) -> tuple:
    return ("concat", ((conv(64, 1),), (conv(48, 1), conv(64, 5, padding=2)),
                       (conv(64, 1), conv(96, 3, padding=1), conv(96, 3, padding=1)),
                       (AVG3, conv(pool, 1))))


def _c(c7: int) -> tuple:
    return ("concat", ((conv(192, 1),),
                       (conv(c7, 1), conv(c7, (1, 7), **ROW7), conv(192, (7, 1), **COL7)),
                       (conv(c7, 1), conv(c7, (7, 1), **COL7), conv(c7, (1, 7), **ROW7),
                        conv(c7, (7, 1), **COL7), conv(192, (1, 7), **ROW7)),
                       (AVG3, conv(192, 1))))


def _e() -> tuple:
    return ("concat", ((conv(320, 1),), (conv(384, 1), _fork(384)),
                       (conv(448, 1), conv(384, 3, padding=1), _fork(384)), (AVG3, conv(192, 1))))


# torchvision's Inception3 from Conv2d_1a_3x3 to Mixed_7c, in its order (branches included), then
# global average pooling and the fc layer
INCEPTION3 = (
    conv(32, 3, stride=2), conv(32, 3), conv(64, 3, padding=1), MAX3, conv(80, 1), conv(192, 3),
    MAX3, _a(32), _a(64), _a(64),
    ("concat", ((conv(384, 3, stride=2),),
                (conv(64, 1), conv(96, 3, padding=1), conv(96, 3, stride=2)), (MAX3,))),
    _c(128), _c(160), _c(160), _c(192),
    ("concat", ((conv(192, 1), conv(320, 3, stride=2)),
                (conv(192, 1), conv(192, (1, 7), padding=(0, 3)),
                 conv(192, (7, 1), padding=(3, 0)), conv(192, 3, stride=2)), (MAX3,))),
    _e(), _e())


# Inception-v4 (timm's inception_v4, TF-slim's and tf_cnn_benchmarks' definition): the stem, 4 A
# blocks, reduction A, 7 B blocks, reduction B, 3 C blocks, then global average pooling and the fc
_A4 = ("concat", ((conv(96, 1),), (conv(64, 1), conv(96, 3, padding=1)),
                  (conv(64, 1), conv(96, 3, padding=1), conv(96, 3, padding=1)),
                  (AVG3_NOPAD, conv(96, 1))))
_B4 = ("concat", ((conv(384, 1),),
                  (conv(192, 1), conv(224, (1, 7), **ROW7), conv(256, (7, 1), **COL7)),
                  (conv(192, 1), conv(192, (7, 1), **COL7), conv(224, (1, 7), **ROW7),
                   conv(224, (7, 1), **COL7), conv(256, (1, 7), **ROW7)),
                  (AVG3_NOPAD, conv(128, 1))))
_C4 = ("concat", ((conv(256, 1),), (conv(384, 1), _fork(256)),
                  (conv(384, 1), conv(448, (3, 1), padding=(1, 0)),
                   conv(512, (1, 3), padding=(0, 1)), _fork(256)),
                  (AVG3_NOPAD, conv(256, 1))))
INCEPTION4 = (
    conv(32, 3, stride=2), conv(32, 3), conv(64, 3, padding=1),
    ("concat", ((MAX3,), (conv(96, 3, stride=2),))),
    ("concat", ((conv(64, 1), conv(96, 3)),
                (conv(64, 1), conv(64, (1, 7), **ROW7), conv(64, (7, 1), **COL7), conv(96, 3)))),
    ("concat", ((conv(192, 3, stride=2),), (MAX3,))),
    _A4, _A4, _A4, _A4,
    ("concat", ((conv(384, 3, stride=2),),
                (conv(192, 1), conv(224, 3, padding=1), conv(256, 3, stride=2)), (MAX3,))),
    _B4, _B4, _B4, _B4, _B4, _B4, _B4,
    ("concat", ((conv(192, 1), conv(192, 3, stride=2)),
                (conv(256, 1), conv(256, (1, 7), **ROW7), conv(320, (7, 1), **COL7),
                 conv(320, 3, stride=2)), (MAX3,))),
    _C4, _C4, _C4)
INCEPTIONS = {"inception3": INCEPTION3, "inception4": INCEPTION4}


class Tally:
    """Walks a network's layers over a (channels, height, width) shape, counting trainable
    parameters and the multiply-adds of its convolutions and fully connected layers."""

    def __init__(self, size: int, channels: int = 3):
        self.shape, self.parameters, self.macs = (channels, size, size), 0, 0

    def conv(self, out: int, kernel, stride=1, padding=0, bias: bool = False, bn: bool = True):
        (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(padding)
        c, h, w = self.shape
        h, w = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
        if h < 1 or w < 1:
            raise ValueError("the feature map vanishes")
        self.parameters += c * out * kh * kw + (out if bias else 0) + (2 * out if bn else 0)
        self.macs += h * w * c * out * kh * kw
        self.shape = (out, h, w)

    def pool(self, kernel, stride, padding=0):
        (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(padding)
        c, h, w = self.shape
        h, w = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
        if h < 1 or w < 1:
            raise ValueError("the feature map vanishes")
        self.shape = (c, h, w)

    def fc(self, out: int):
        features = self.shape[0] * self.shape[1] * self.shape[2]
        self.parameters += features * out + out
        self.macs += features * out
        self.shape = (out, 1, 1)

    def layers(self, layers) -> None:
        for layer in layers:
            if layer[0] == "conv":
                self.conv(*layer[1:])
            elif layer[0] == "concat":
                start, outs = self.shape, []
                for branch in layer[1]:
                    self.shape = start
                    self.layers(branch)
                    outs.append(self.shape)
                self.shape = (sum(s[0] for s in outs),) + outs[0][1:]
            else:
                self.pool(*layer[1:])


def _resnet(t: Tally, name: str) -> None:
    t.conv(64, 7, 2, 3)
    t.pool(3, 2, 1)
    for width, blocks, stride in resnet_stages(name):
        for i in range(blocks):
            start, out = t.shape, width * RESNET_EXPANSION
            s = stride if i == 0 else 1
            t.conv(width, 1)
            t.conv(width, 3, s, 1)
            t.conv(out, 1)
            if s != 1 or start[0] != out:  # the downsample branch, on the block's input
                main, t.shape = t.shape, start
                t.conv(out, 1, s)
                t.shape = main
    t.shape = (t.shape[0], 1, 1)  # global average pooling
    t.fc(1000)


def _vgg(t: Tally) -> None:
    for v in VGG16:
        if v == "M":
            t.pool(2, 2)
        else:
            t.conv(v, 3, 1, 1, bias=True, bn=False)
    t.shape = (t.shape[0], VGG_POOL, VGG_POOL)  # adaptive average pooling
    for width in VGG_CLASSIFIER + (1000,):
        t.fc(width)


def _inception(t: Tally, name: str) -> None:
    t.layers(INCEPTIONS[name])
    t.shape = (t.shape[0], 1, 1)
    t.fc(1000)


def tally(name: str, size: int) -> Tally:
    """Parameters (1000 classes) and multiply-adds per image of `name` at size x size; ValueError
    when the image is too small for the network."""
    t = Tally(size)
    if name in RESNET_BLOCKS:
        _resnet(t, name)
    elif name == "vgg16":
        _vgg(t)
    elif name in INCEPTIONS:
        _inception(t, name)
    else:
        raise ValueError(get(name).unsupported or "no layer table for {}".format(name))
    return t


def smallest_size(name: str) -> int:
    """The smallest square image (>= 32, the spec's floor) the network accepts."""
    size = 32
    while True:
        try:
            tally(name, size)
            return size
        except ValueError as exc:
            if str(exc) != "the feature map vanishes":
                raise
            size += 1


def image_size(name: str, given, quick: bool) -> int:
    """The image side a cell of `name` runs at: `given` (--image-size), else the quick or the
    native size. ValueError when `given` is too small for the network."""
    if given is None:
        net = get(name)
        return net.quick if quick else net.native
    low = smallest_size(name)
    if given < low:
        raise ValueError("{} needs images of at least {}x{} px".format(name, low, low))
    return given


def summary() -> Dict[str, Dict]:
    """name -> what `compare list models` shows: title, reference, parameters, native size,
    multiply-adds per image at the native size, smallest and quick size, or the reason."""
    out = {}
    for net in NETWORKS:
        row = {"title": net.title, "reference": net.reference, "native": net.native,
               "unsupported": net.unsupported}
        if not net.unsupported:
            t = tally(net.name, net.native)
            row.update(parameters=t.parameters, macs=t.macs, quick=net.quick,
                       smallest=smallest_size(net.name), note=NOTES[net.name])
        out[net.name] = row
    return out


def pooling_matrix(out: int, size: int) -> List[List[float]]:
    """PyTorch's adaptive average pooling of `size` values to `out` as an out x size matrix: output
    i averages inputs floor(i * size / out) to ceil((i + 1) * size / out) - 1 (a 2-D pool is this
    along the rows, then along the columns)."""
    rows = []
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        rows.append([1.0 / (end - start) if start <= j < end else 0.0 for j in range(size)])
    return rows
