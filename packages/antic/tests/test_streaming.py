"""The streaming loop: keyframes and deltas, the store's bytes, decompress, resume, bad input."""

import struct
import warnings

import pytest
import torch
from antic_compress import ANTIC, EnstrophySelector, SnapshotStore, UniformSelector, grid_coords
from antic_compress.fields import LoRALinear
from antic_compress.metrics import interpolate_frames
from antic_compress.store import header_bytes
from antic_compress.training import predict
from antic_helpers import N, antic, compressor, frames


def test_keyframes_and_deltas_follow_reset_every_n(tmp_path):
    run = antic(tmp_path, selector=UniformSelector(1.0), reset_every_n=4)
    records = run.run(frames(10))
    kinds = [r.kind for r in records]
    # selected_num 4 and 8 are keyframes (selected_num counts the first frame as 1)
    assert kinds == [
        "key",
        "delta",
        "delta",
        "key",
        "delta",
        "delta",
        "delta",
        "key",
        "delta",
        "delta",
    ]
    assert [r.keyframe for r in records] == [0, 0, 0, 3, 3, 3, 3, 7, 7, 7]
    assert all(isinstance(layer, LoRALinear) for layer in run.compressor.model.hidden_layers)
    delta = records[1]
    hidden = run.compressor.model.hidden_layers
    assert delta.n_params == sum(layer.lora_a.numel() + layer.lora_b.numel() for layer in hidden)


def test_decompress_after_reload_equals_in_memory_output(tmp_path):
    run = antic(tmp_path, selector=UniformSelector(1.0))
    run.run(frames(6))
    expected = run.compressor.reconstruct(run.coords)  # the last snapshot, a delta
    store = SnapshotStore(tmp_path)
    assert store.records[-1].kind == "delta"
    assert torch.equal(store.decompress(len(store) - 1, run.coords), expected)
    merged, _stats = store.load_model(len(store) - 1, merge=True)
    assert (
        predict(merged, run.coords) - predict(run.compressor.model, run.coords)
    ).abs().max() <= 1e-6


def test_bytes_on_disk_are_parameter_bytes_plus_metadata(tmp_path):
    run = antic(tmp_path, selector=UniformSelector(1.0))
    records = run.run(frames(5))
    for r in records:
        path = run.store.snapshot_path(r.index)
        norm_bytes = 2 * 4  # min and max, one feature, float32
        assert (
            path.stat().st_size == r.param_bytes + norm_bytes + header_bytes(path) == r.file_bytes
        )
        assert r.param_bytes == 4 * r.n_params
    stats = run.stats()
    values = N * N
    assert stats["total_cr"] == pytest.approx(5 * values / sum(r.n_params for r in records))
    assert stats["total_cr_bytes"] == pytest.approx(
        5 * values * 4 / sum(r.file_bytes for r in records)
    )
    assert stats["total_cr"] == pytest.approx(stats["temporal_cr"] * stats["spatial_cr"])
    with open(run.store.snapshot_path(0), "rb") as f:
        assert struct.unpack("<Q", f.read(8))[0] + 8 == header_bytes(run.store.snapshot_path(0))


def test_records_hold_the_frame_actually_compressed(tmp_path):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(N, N, generator=g)
    series = [(0.1, a), (0.2, a.clone()), (0.3, a.clone()), (0.4, torch.randn(N, N, generator=g))]
    run = antic(tmp_path, selector=EnstrophySelector(window_size=10))
    records = run.run(series)
    assert [(r.frame, r.t) for r in records] == [(0, 0.1), (2, pytest.approx(0.3))]


def test_modes_full_and_scratch_store_keyframes(tmp_path):
    for adapter in ("full", "scratch"):
        run = antic(tmp_path / adapter, selector=UniformSelector(1.0), adapter=adapter)
        assert {r.kind for r in run.run(frames(3))} == {"key"}


def test_resume_continues_identically(tmp_path):
    series = frames(12)
    whole = antic(tmp_path / "whole")
    whole.run(series)
    first = antic(tmp_path / "split", stop_at=series[5][0])
    first.set_solver_state({"w_hat": torch.arange(3.0), "t": series[5][0]})
    first.run(series)
    assert first.stopped
    with pytest.raises(RuntimeError, match="resume"):
        first.step(series[6][1], series[6][0])
    with pytest.raises(ValueError, match="stop_at"):
        ANTIC.resume(
            EnstrophySelector(window_size=3),
            compressor(),
            grid_coords(N),
            tmp_path / "split",
            stop_at=series[2][0],
            **settings(),
        )
    second, solver_state = ANTIC.resume(
        EnstrophySelector(window_size=3),
        compressor(),
        grid_coords(N),
        tmp_path / "split",
        **settings(),
    )
    assert solver_state is not None and torch.equal(solver_state["w_hat"], torch.arange(3.0))
    second.run(series[6:])
    a, b = SnapshotStore(tmp_path / "whole"), SnapshotStore(tmp_path / "split")
    assert a.frames() == b.frames() and len(a) > 3
    for k in range(len(a)):
        assert torch.equal(a.decompress(k, whole.coords), b.decompress(k, whole.coords))


def settings():
    return dict(
        initial_epochs=4,
        subsequent_epochs=2,
        batch_size=64,
        lr=1e-2,
        adapter="lora",
        lora_rank=2,
        reset_every_n=4,
    )


def test_nan_loss_rebuilds_and_stores_a_keyframe(tmp_path, monkeypatch):
    run = antic(tmp_path, selector=UniformSelector(1.0))
    run.run(frames(2))
    calls = []
    original = run.compressor.fit

    def first_nan(*args, **kwargs):
        calls.append(args[3])
        loss = original(*args, **kwargs)
        return float("nan") if len(calls) == 1 else loss

    monkeypatch.setattr(run.compressor, "fit", first_nan)
    with pytest.warns(UserWarning, match="NaN loss"):
        record = run.step(frames(3)[2][1], 0.35)
    assert calls == ["lora", "all"] and record is not None and record.kind == "key"


def test_fp16_downcast_halves_hidden_bytes(tmp_path):
    run = antic(tmp_path / "h", selector=UniformSelector(1.0), adapter="full", downcast_fp16=True)
    record = run.run(frames(1))[0]
    assert record.fp16
    hidden = sum(p.numel() for p in run.compressor.model.hidden_layers.parameters())
    assert record.param_bytes == 4 * record.n_params - 2 * hidden
    store = SnapshotStore(tmp_path / "h")
    assert torch.equal(store.decompress(0, run.coords), run.compressor.reconstruct(run.coords))


def test_interpolation_between_kept_frames():
    snaps = [torch.zeros(2), torch.full((2,), 4.0)]
    out = interpolate_frames([0, 4], snaps, 6)
    assert out[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 4.0]


# -- bad input ----------------------------------------------------------------------------------
def test_non_finite_field_names_t_before_the_normaliser(tmp_path):
    run = antic(tmp_path)
    run.step(frames(1)[0][1], 0.1)
    mins = list(run.compressor.normalizer.mins)
    bad = frames(2)[1][1].clone()
    bad[3, 3] = float("inf")
    with pytest.raises(ValueError, match=r"t=0\.2 contains NaN/Inf"):
        run.step(bad, 0.2)
    assert list(run.compressor.normalizer.mins) == mins and run.selector.total_num == 1


def test_field_shape_change_and_mismatched_n(tmp_path):
    run = antic(tmp_path)
    with pytest.raises(ValueError, match=r"\(8, 8\).*\(256, 2\)"):
        run.step(torch.zeros(8, 8), 0.1)
    run.step(torch.zeros(N, N), 0.1)
    with pytest.raises(ValueError, match="shape changed"):
        run.step(torch.zeros(N * N), 0.2)
    with pytest.raises(ValueError, match="increase"):
        run.step(torch.zeros(N, N), 0.05)


def test_wrong_coords_and_targets(tmp_path):
    c = compressor()
    with pytest.raises(ValueError, match=r"coords"):
        ANTIC(UniformSelector(), c, torch.zeros(10, 3), tmp_path)
    with pytest.raises(ValueError, match="bfloat16"):
        ANTIC(UniformSelector(), c, grid_coords(N).to(torch.bfloat16), tmp_path)
    from antic_compress.training import FitConfig

    with pytest.raises(ValueError, match=r"\(10, 2\).*\(9, 1\)"):
        c.fit(torch.zeros(10, 2), torch.zeros(9, 1), FitConfig())


@pytest.mark.parametrize(
    "kwargs", [dict(lora_rank=0), dict(lora_rank=9), dict(reset_every_n=-1), dict(adapter="x")]
)
def test_bad_settings(tmp_path, kwargs):
    with pytest.raises(ValueError):
        antic(tmp_path, **kwargs)


def test_batch_larger_than_n_is_clamped_with_a_warning(tmp_path):
    run = antic(tmp_path, batch_size=10_000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = run.step(frames(1)[0][1], 0.1)
    assert any("clamped to 256" in str(w.message) for w in caught)
    assert record is not None and record.loss == record.loss  # finite, not a ZeroDivisionError
