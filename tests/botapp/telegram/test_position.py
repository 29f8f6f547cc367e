"""runbot's place in Telegram's update sequences (botapp/telegram/position.py): counted by what has
been handled, so a restart asks Telegram again for what was received but not handled."""

from pyrogram import raw

from botapp.telegram.position import HOLE_WAIT, PTS, QTS, Position, PositionState, Span, spans_of

CHANNEL = -1001000000001


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def started(pts=10, qts=3, channels=None) -> tuple[Position, Clock]:
    clock = Clock()
    position = Position(clock=clock)
    position.start(PositionState(pts=pts, qts=qts, date=1_700_000_000, channels=channels or {}))
    return position, clock


def message(pts: int) -> list[Span]:
    return [Span(PTS, pts - 1, pts)]


def test_the_stored_pts_is_below_every_update_still_being_handled():
    position, _ = started()
    first, second, third = (position.received(message(p)) for p in (11, 12, 13))
    position.finished(second)  # handled out of order
    position.finished(third)
    assert position.snapshot().pts == 10  # 11 is still being handled: a restart asks from 10
    position.finished(first)
    assert position.snapshot().pts == 13


def test_an_update_received_but_never_handled_keeps_the_position_back_for_good():
    """A worker killed mid-update (or a stop that cancels it) never finishes its packet."""
    position, clock = started()
    position.received(message(11))
    done = position.received(message(12))
    position.finished(done)
    clock.now += 3600
    assert position.snapshot().pts == 10


def test_a_hole_no_update_fills_is_taken_for_the_bots_own_messages_after_a_while():
    """runbot's replies take pts too, and come back as answers, not updates: 11 and 12 never come."""
    position, clock = started()
    position.finished(position.received(message(13)))
    assert position.snapshot().pts == 10  # 11 and 12 may still come, out of order
    assert position.holes()
    clock.now += HOLE_WAIT
    assert position.snapshot().pts == 13
    assert not position.holes()


def test_under_load_every_hole_older_than_the_wait_closes_at_once():
    """A hole after each reply: a second's worth of them closes together, not one a second."""
    position, clock = started()
    for pts in range(12, 40, 2):  # 11, 13, 15, ... are runbot's replies
        position.finished(position.received(message(pts)))
    clock.now += HOLE_WAIT / 2
    position.finished(position.received(message(41)))  # newer: its hole (40) may still fill
    clock.now += HOLE_WAIT / 2
    assert position.snapshot().pts == 38
    clock.now += HOLE_WAIT / 2
    assert position.snapshot().pts == 41


def test_an_update_that_fills_a_hole_in_time_is_waited_for():
    position, clock = started()
    late = position.received(message(11))
    position.finished(position.received(message(12)))
    clock.now += HOLE_WAIT / 2
    assert position.snapshot().pts == 10
    position.finished(late)
    assert position.snapshot().pts == 12


def test_a_fetched_difference_counts_as_handled_once_every_update_in_it_is():
    position, _ = started()
    batch = position.received([Span(PTS, 10, 40), Span(QTS, 3, 5)], packets=3)
    for _ in range(2):
        position.finished(batch)
    assert (position.snapshot().pts, position.snapshot().qts) == (10, 3)
    position.finished(batch)
    assert (position.snapshot().pts, position.snapshot().qts) == (40, 5)


def test_an_empty_difference_moves_the_position_at_once():
    position, _ = started()
    position.received([Span(PTS, 10, 25)], packets=0)  # only the bot's own messages happened
    assert position.snapshot().pts == 25


def test_each_channel_and_qts_keep_their_own_number():
    position, _ = started(channels={CHANNEL: 50})
    post = position.received([Span(CHANNEL, 50, 51)])
    stopped = position.received([Span(QTS, 3, 4)])
    position.finished(stopped)
    state = position.snapshot()
    assert (state.pts, state.qts, state.channels) == (10, 4, {CHANNEL: 50})
    position.finished(post)
    assert position.snapshot().channels == {CHANNEL: 51}


def test_a_channel_first_heard_of_starts_just_before_its_update():
    position, _ = started()
    position.received([Span(CHANNEL, 70, 71)])
    assert position.snapshot().channels == {CHANNEL: 70}


def test_updates_received_before_the_stored_position_is_known_wait_for_it():
    """kurigram receives updates from its start on; runbot reads its position from PostgreSQL after."""
    clock = Clock()
    position = Position(clock=clock)
    early = position.received(message(11))
    position.finished(position.received(message(12)))
    assert position.snapshot() is None
    position.start(PositionState(pts=10, qts=3, date=0))
    assert position.snapshot().pts == 10
    position.finished(early)
    assert position.snapshot().pts == 12


def test_once_closed_nothing_counts_as_handled():
    """runbot stopping: what it still handles (or refuses) comes again at the next start."""
    position, _ = started()
    in_flight = position.received(message(11))
    position.close()
    position.finished(in_flight)
    position.finished(position.received(message(12)))
    assert position.snapshot().pts == 10


def test_what_sequence_each_raw_update_belongs_to():
    private = raw.types.UpdateNewMessage(message=raw.types.MessageEmpty(id=1), pts=12, pts_count=1)
    post = raw.types.UpdateNewChannelMessage(
        message=raw.types.Message(
            id=5, peer_id=raw.types.PeerChannel(channel_id=1000000001), date=0, message="", restriction_reason=[]
        ),
        pts=51,
        pts_count=1,
    )
    deleted = raw.types.UpdateDeleteChannelMessages(channel_id=1000000001, messages=[5], pts=52, pts_count=1)
    stopped = raw.types.UpdateBotStopped(user_id=1001, date=0, stopped=True, qts=4)
    tapped = raw.types.UpdateBotCallbackQuery(
        query_id=1, user_id=1001, peer=raw.types.PeerUser(user_id=1001), msg_id=1, chat_instance=1
    )
    assert spans_of(private) == [Span(PTS, 11, 12)]
    assert spans_of(post) == [Span(CHANNEL, 50, 51)]
    assert spans_of(deleted) == [Span(CHANNEL, 51, 52)]
    assert spans_of(stopped) == [Span(QTS, 3, 4)]
    assert spans_of(tapped) == []  # no sequence: Telegram never sends a callback query again


def test_while_what_was_missed_is_being_fetched_the_position_waits_for_it():
    """Live updates come at once after a restart, the difference slice by slice: the hole between
    is what is being fetched, not runbot's own messages, however long it takes."""
    position, clock = started()
    position.hold(PTS, 10)
    position.finished(position.received(message(300)))  # live, far ahead
    clock.now += 10 * HOLE_WAIT
    assert position.snapshot().pts == 10
    position.finished(position.received([Span(PTS, 10, 299)], packets=0))  # the difference's last slice
    position.release(PTS)
    assert position.snapshot().pts == 300
