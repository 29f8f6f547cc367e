"""The demo video's container (offline/demo_video.py): read back frame for frame, and looped."""

from offline.demo_video import DEMO_VIDEO, HEIGHT, SECONDS, WIDTH, demo_video_looped, webm_frames, webm_mux


def test_the_committed_demo_reads_back_into_the_frames_it_was_muxed_from():
    data = DEMO_VIDEO.read_bytes()
    frames = webm_frames(data)
    assert len(frames) > SECONDS and frames[0].key and frames[0].ms == 0
    assert [f.ms for f in frames] == sorted(f.ms for f in frames) and frames[-1].ms < SECONDS * 1000
    assert webm_mux(frames, width=WIDTH, height=HEIGHT, duration_ms=SECONDS * 1000) == data


def test_a_looped_demo_plays_the_frames_over_one_period_after_another():
    frames = webm_frames(DEMO_VIDEO.read_bytes())
    looped = webm_frames(demo_video_looped(3))
    assert len(looped) == 3 * len(frames)
    assert [f.data for f in looped] == [f.data for f in frames] * 3
    assert [f.ms for f in looped[len(frames) :][: len(frames)]] == [f.ms + SECONDS * 1000 for f in frames]
