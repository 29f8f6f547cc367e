"""A broadcast claim in one round trip: the function `courier_broadcast_claim` takes the claim
lock, reads the live claims and walks and claims each gap between them, where the sender used to
send three statements inside a transaction of its own (BEGIN, the lock, the claims, the walk,
COMMIT: five round trips, about half the claim's time). The sender calls it outside a
transaction: the statement's own transaction holds the lock and commits the claims.

In PL/pgSQL each statement of a VOLATILE function takes a new snapshot (READ COMMITTED, Django's
isolation level), so the claims are read after the lock is held: the claims of the sender before
are seen. The gap's statement is run with EXECUTE, planned with its values each time as when the
sender sent it itself (an ordered walk of the partial index `delivery_pending`); GAP_SQL is what
tests/scheduler/test_delivery_indexes.py EXPLAINs. A later change to the function is a new
migration with its own copy (CREATE OR REPLACE)."""

from django.db import migrations

# $1 broadcast, $2 'pending', $3 above (exclusive), $4 below (exclusive), $5 at most, $6 claimed_at, $7 lease_until
GAP_SQL = """
WITH picked AS (
    SELECT d.id, d.user_id, d.chat_id, d.retry_from FROM botapp_broadcastdelivery AS d
    WHERE d.broadcast_id = $1 AND d.status = $2 AND d.id > $3 AND d.id < $4
    ORDER BY d.id LIMIT $5
), made AS (
    INSERT INTO botapp_broadcastclaim (broadcast_id, first_id, last_id, claimed_at, lease_until)
    SELECT $1, min(picked.id), max(picked.id), $6, $7 FROM picked HAVING count(*) > 0
    RETURNING botapp_broadcastclaim.id
)
SELECT p.id, $1::bigint, p.user_id, p.chat_id, u.access_hash, u.state, p.retry_from, (SELECT made.id FROM made)
FROM picked AS p JOIN botapp_telegramuser AS u ON u.id = p.user_id
"""

FUNCTION = f"""
CREATE OR REPLACE FUNCTION courier_broadcast_claim(
    p_broadcast bigint, p_n integer, p_after bigint, p_now timestamptz, p_lease_until timestamptz,
    p_pending varchar, p_lock integer
) RETURNS TABLE (
    id bigint, broadcast_id bigint, user_id bigint, chat_id bigint, access_hash bigint,
    user_state varchar, retry_from timestamptz, claim bigint
) LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    above bigint := p_after;
    wanted integer := p_n;
    got integer;
    k record;
BEGIN
    -- One walk of a broadcast at a time (ids past 2**31 share a lock with a lower one: harmless).
    PERFORM pg_advisory_xact_lock(p_lock, (p_broadcast % 2147483648)::integer);
    FOR k IN
        SELECT c.first_id, c.last_id FROM botapp_broadcastclaim AS c
        WHERE c.broadcast_id = p_broadcast AND c.last_id > p_after
        UNION ALL SELECT 9223372036854775807, 9223372036854775807  -- the end of the last gap
        ORDER BY 1
    LOOP
        IF k.first_id > above + 1 THEN  -- ids strictly between: a gap that may hold pending rows
            RETURN QUERY EXECUTE $gap${GAP_SQL}$gap$
                USING p_broadcast, p_pending, above, k.first_id, wanted, p_now, p_lease_until;
            GET DIAGNOSTICS got = ROW_COUNT;
            wanted := wanted - got;
            EXIT WHEN wanted <= 0;
        END IF;
        above := greatest(above, k.last_id);
    END LOOP;
END
$fn$;
"""

DROP = "DROP FUNCTION IF EXISTS courier_broadcast_claim(bigint, integer, bigint, timestamptz, timestamptz, varchar, integer)"


class Migration(migrations.Migration):
    dependencies = [
        ("botapp", "0021_broadcast_claim"),
    ]

    operations = [migrations.RunSQL(FUNCTION, DROP)]
