"""Saved Kleio/Kleoniki models (tierkit.learned.modelfile, docs/learned.md "Saved models"):
loaded models predict what the trained ones did, the same models give the same bytes, an
existing file is not overwritten unless forced, and every kind of damage is one error line
naming the file and the key or array."""
import io
import json
import os
import zipfile

import numpy as np
import pytest

pytest.importorskip("torch")

from tierkit._core import TierkitError  # noqa: E402
from tierkit.learned import lstm, modelfile  # noqa: E402

CFG = lstm.TrainConfig(history=4, hidden=4, epochs=2, bins=4, seed=7, device="cpu")
META = {"policy": "kleio", "pages": np.array([0x1000, 0x5000, 0x9000], dtype=np.uint64), "groups": [0, 1, 2, 1, 0],
        "period": np.int64(1000), "bins": 4, "digest": "ab" * 32, "train": {"epochs": 2, "lr": 0.02}}


@pytest.fixture(scope="module")
def trained():
    rng = np.random.default_rng(1)
    series = rng.integers(0, CFG.bins + 1, size=(5, 24))
    series[0] = np.tile([0, 3, 4], 8)  # a periodic one among the random ones
    return lstm.train(series, CFG), series


@pytest.fixture(scope="module")
def saved(trained, tmp_path_factory):
    p = tmp_path_factory.mktemp("models") / "m.npz"
    modelfile.save(p, trained[0], META)
    return p


def test_loaded_models_predict_what_the_trained_ones_did(trained, saved):
    models, series = trained
    loaded, meta = modelfile.load(saved)
    assert meta == {**META, "pages": [0x1000, 0x5000, 0x9000], "period": 1000}
    assert loaded.count == models.count == 5
    assert loaded.config == CFG
    assert loaded.train_seconds == 0 and loaded.device == "cpu"
    assert loaded.info == {"loaded_from": str(saved), "trained_on": "cpu"}
    for k in ("w_gates", "w_out"):
        assert loaded.state[k].dtype == models.state[k].dtype and loaded.state[k].device.type == "cpu"
        assert np.array_equal(loaded.state[k].numpy(), models.state[k].numpy())
    assert np.array_equal(lstm.predict(loaded, series), lstm.predict(models, series))
    # other inputs, several rows per model (Kleoniki's groups)
    rng = np.random.default_rng(2)
    inputs = rng.integers(0, CFG.bins + 1, size=(12, 30))
    model_of = rng.integers(0, 5, size=12)
    assert np.array_equal(lstm.predict(loaded, inputs, model_of), lstm.predict(models, inputs, model_of))


def test_the_file_is_an_npz_with_a_json_header(saved):
    with np.load(saved, allow_pickle=False) as z:
        assert sorted(z.files) == ["header", "w_gates", "w_out"]
        assert z["header"].dtype == np.uint8
        h = json.loads(z["header"].tobytes().decode("utf-8"))
        assert z["w_gates"].dtype == np.float32 and z["w_gates"].shape == (5, 16, 6)
        assert z["w_out"].dtype == np.float32 and z["w_out"].shape == (5, 5, 5)
    assert h["format"] == "tierkit-models" and h["version"] == 1
    assert h["config"] == {"history": 4, "hidden": 4, "epochs": 2, "lr": 0.02, "bins": 4, "seed": 7, "device": "cpu",
                           "chunk": 4096, "class_weight": "none"}
    assert h["count"] == 5 and h["device"] == "cpu"
    assert h["arrays"] == {"w_gates": [5, 16, 6], "w_out": [5, 5, 5]}
    assert h["meta"]["pages"] == [0x1000, 0x5000, 0x9000]


def test_same_models_same_bytes(trained, tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    modelfile.save(a, trained[0], META)
    os.utime(a, (0, 0))
    modelfile.save(b, trained[0], dict(META))
    assert a.read_bytes() == b.read_bytes() == modelfile.encode(trained[0], META)
    # a different meta is a different file
    assert modelfile.encode(trained[0], {**META, "period": 2000}) != a.read_bytes()


def test_an_existing_file_is_overwritten_only_when_forced(trained, tmp_path):
    p = tmp_path / "m.npz"
    p.write_bytes(b"precious")
    with pytest.raises(TierkitError) as e:
        modelfile.save(p, trained[0], META)
    assert str(p) in str(e.value) and "exists" in str(e.value)
    assert p.read_bytes() == b"precious"
    modelfile.save(p, trained[0], META, force=True)
    assert modelfile.load(p)[0].count == 5
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]  # no temporary file left behind
    with pytest.raises(TierkitError, match="directory"):
        modelfile.save(tmp_path, trained[0], META, force=True)


def test_models_that_diverged_are_not_saved(trained, tmp_path):
    models = trained[0]
    bad = lstm.Models(models.config, {k: v.clone() for k, v in models.state.items()}, models.count, 0.0, "cpu")
    bad.state["w_out"][1, 2, 3] = float("nan")
    with pytest.raises(TierkitError, match=r"x\.npz: w_out: 1 weights are not finite .*first at \[1, 2, 3\]"):
        modelfile.save(tmp_path / "x.npz", bad, META)
    assert not (tmp_path / "x.npz").exists()


# ------------------------------------------------------------------------------ damage


def parts(path):
    """A saved file's header (a dict) and arrays."""
    with np.load(path, allow_pickle=False) as z:
        return json.loads(z["header"].tobytes()), {k: z[k] for k in ("w_gates", "w_out")}


def write(path, header, arrays, compression=zipfile.ZIP_DEFLATED):
    """A models file written by hand: ``header`` a dict, str or bytes (or None: no header)."""
    entries = {}
    if header is not None:
        hb = header if isinstance(header, bytes) else (header if isinstance(header, str) else json.dumps(header)).encode()
        entries["header"] = np.frombuffer(hb, dtype=np.uint8)
    entries.update(arrays)
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for name, a in entries.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(a), allow_pickle=True)
            z.writestr(name + ".npy", buf.getvalue())
    return path


def refused(path, *fragments):
    with pytest.raises(TierkitError) as e:
        modelfile.load(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: "), msg
    for f in fragments:
        assert f in msg, msg
    return msg


def test_not_an_npz(tmp_path, saved):
    refused(write_bytes(tmp_path / "text.npz", b"history,oracle\n"), "not a tierkit models file")
    refused(write_bytes(tmp_path / "cut.npz", saved.read_bytes()[:len(saved.read_bytes()) // 2]), "not an .npz archive")
    refused(write_bytes(tmp_path / "empty.npz", b""), "not an .npz archive")
    buf = io.BytesIO()
    np.save(buf, np.zeros(3, dtype=np.float32))
    refused(write_bytes(tmp_path / "one.npy", buf.getvalue()), "not an .npz archive")
    refused(tmp_path / "absent.npz", "no such models file")
    refused(tmp_path, "a directory")


def write_bytes(p, b):
    p.write_bytes(b)
    return p


def test_a_header_that_is_wrong(saved, tmp_path):
    h, arrays = parts(saved)
    refused(write(tmp_path / "noheader.npz", None, arrays), "header: missing")
    refused(write(tmp_path / "v2.npz", {**h, "version": 2}, arrays), "header.version: 2 is not supported", "version 1")
    refused(write(tmp_path / "vs.npz", {**h, "version": "1"}, arrays), "header.version")
    refused(write(tmp_path / "fmt.npz", {**h, "format": "other"}, arrays), "header.format", "not a tierkit models file")
    refused(write(tmp_path / "nofmt.npz", {k: v for k, v in h.items() if k != "format"}, arrays), "header.format: missing")
    refused(write(tmp_path / "json.npz", "{\"format\": ", arrays), "header", "not JSON")
    refused(write(tmp_path / "nan.npz", json.dumps(h).replace("0.02", "NaN"), arrays), "header", "not JSON")
    refused(write(tmp_path / "utf8.npz", b"{\"format\": \"\xff\"}", arrays), "header", "not UTF-8")
    refused(write(tmp_path / "list.npz", "[1, 2]", arrays), "header", "not a JSON object")
    refused(write(tmp_path / "hidden.npz", {**h, "config": {**h["config"], "hidden": "4"}}, arrays), "header.config.hidden")
    refused(write(tmp_path / "nobins.npz", {**h, "config": {k: v for k, v in h["config"].items() if k != "bins"}}, arrays),
            "header.config.bins: missing")
    refused(write(tmp_path / "lr.npz", {**h, "config": {**h["config"], "lr": -1}}, arrays), "header.config.lr")
    refused(write(tmp_path / "cw.npz", {**h, "config": {**h["config"], "class_weight": "x"}}, arrays), "header.config.class_weight")
    refused(write(tmp_path / "extra.npz", {**h, "config": {**h["config"], "dropout": 0.1}}, arrays), "header.config.dropout")
    refused(write(tmp_path / "count.npz", {**h, "count": -1}, arrays), "header.count")
    refused(write(tmp_path / "meta.npz", {**h, "meta": [1]}, arrays), "header.meta")
    refused(write(tmp_path / "arrays.npz", {**h, "arrays": {**h["arrays"], "w_out": [5, 5, 6]}}, arrays), "header.arrays.w_out")
    refused(write(tmp_path / "huge.npz", {**h, "count": 10 ** 12}, arrays), "header.count", "more than a models file may hold")
    refused(write(tmp_path / "hdt.npz", None, {"header": np.frombuffer(json.dumps(h).encode(), np.uint8).astype(np.int16), **arrays}),
            "header: dtype int16, shape")


def test_a_header_too_large(saved, tmp_path, monkeypatch):
    h, arrays = parts(saved)
    p = write(tmp_path / "big.npz", {**h, "meta": {"pages": list(range(20_000))}}, arrays)
    monkeypatch.setattr(modelfile, "MAX_HEADER_BYTES", 50_000)
    refused(p, "header: ", "more than")


def test_a_file_too_large(saved, monkeypatch):
    monkeypatch.setattr(modelfile, "MAX_FILE_BYTES", 1000)
    refused(saved, "bytes: larger than a models file can be")


def test_arrays_that_are_wrong(saved, tmp_path):
    h, arrays = parts(saved)
    wg, wo = arrays["w_gates"], arrays["w_out"]
    refused(write(tmp_path / "noout.npz", h, {"w_gates": wg}), "w_out: missing")
    refused(write(tmp_path / "shape.npz", h, {"w_gates": wg, "w_out": wo[:, :, :4]}), "w_out: shape [5, 5, 4]", "[5, 5, 5]")
    refused(write(tmp_path / "count.npz", {**h, "count": 4, "arrays": {"w_gates": [4, 16, 6], "w_out": [4, 5, 5]}}, arrays),
            "w_gates: shape [5, 16, 6]", "count 4")
    refused(write(tmp_path / "f64.npz", h, {"w_gates": wg.astype(np.float64), "w_out": wo}), "w_gates: float64 weights, not float32")
    nan = wg.copy()
    nan[2, 3, 1] = np.nan
    refused(write(tmp_path / "nan.npz", h, {"w_gates": nan, "w_out": wo}), "w_gates: 1 weights are not finite", "[2, 3, 1]")
    inf = wo.copy()
    inf[0, 0, 0] = -np.inf
    refused(write(tmp_path / "inf.npz", h, {"w_gates": wg, "w_out": inf}), "w_out: 1 weights are not finite")
    refused(write(tmp_path / "extra.npz", h, {**arrays, "w_extra": wo}), "w_extra.npy: not an array of a tierkit-models file")


class Boom:
    """Unpickling this would run code: a models file must never be unpickled."""

    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_a_pickle_is_never_loaded(saved, tmp_path):
    h, arrays = parts(saved)
    obj = np.empty(h["arrays"]["w_out"], dtype=object)
    obj[...] = Boom()
    p = write(tmp_path / "pickle.npz", h, {"w_gates": arrays["w_gates"], "w_out": obj})
    with zipfile.ZipFile(p) as z:  # the object array really is a pickle in there
        assert b"system" in z.read("w_out.npy")
    refused(p, "w_out: object weights, not float32")
    obj_h = np.empty(3, dtype=object)
    refused(write(tmp_path / "pickle_header.npz", None, {"header": obj_h, **arrays}), "header: dtype object")


def test_damaged_bytes_inside_the_archive(saved, tmp_path):
    h, arrays = parts(saved)
    p = write(tmp_path / "crc.npz", h, arrays, compression=zipfile.ZIP_STORED)
    data = bytearray(p.read_bytes())
    with zipfile.ZipFile(p) as z:
        info = z.getinfo("w_out.npy")
    # the last byte of w_out's data (a weight, past the .npy header): the CRC no longer matches
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.file_size - 1
    data[at] ^= 0xFF
    p.write_bytes(bytes(data))
    refused(p, "w_out: damaged in the archive", "CRC")


def test_a_device_not_present_is_a_clear_error(saved):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        m, _ = modelfile.load(saved, device="cuda")
        assert m.device == "cuda" and m.config.device.startswith("cuda")
    else:
        with pytest.raises(TierkitError, match="CUDA is not available"):
            modelfile.load(saved, device="cuda")
    m, _ = modelfile.load(saved, device="auto")
    assert m.device == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(TierkitError, match="'tpu' is not a device"):
        modelfile.load(saved, device="tpu")
