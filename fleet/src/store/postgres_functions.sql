-- breakerbox fleet on PostgreSQL: the protocol's operations (schema version 1), each one
-- function run as one statement, so one transaction: what the Redis backend's Lua scripts do
-- (record.lua, probe.lua, count.lua, quorum.lua, heartbeat.lua), with the same answers.
--
-- A function about one record first takes a transaction-level advisory lock on it (prefix and
-- name), so that the operations on one record run one after the other, as scripts do in Redis;
-- it then deletes the record if it has expired. Expired rows of other records (swept so that
-- they do not pile up) are deleted only where their record's lock is free at once
-- (`pg_try_advisory_xact_lock`) and their row is not locked (`for update skip locked`): a
-- function waits for no lock but its own record's, taken first, so two instances never wait
-- for each other's (no deadlock); what one skips, a later one deletes. Times are the server's clock
-- (`breakerbox_fleet_now()`), never a host's. Every write of a record is sent with
-- `pg_notify` on the channel `breakerbox_fleet` once its transaction commits.

-- The server's time, in ms since the Unix epoch.
create or replace function breakerbox_fleet_now() returns bigint
language sql volatile as $$
    select floor(extract(epoch from clock_timestamp()) * 1000)::bigint
$$;

-- A field of a notification: `<length in bytes>:<text>`.
create or replace function breakerbox_fleet_field(t text) returns text
language sql immutable as $$
    select octet_length(t)::text || ':' || t
$$;

-- The key of a record's advisory lock.
create or replace function breakerbox_fleet_lock_key(p_prefix text, p_family text, p_name text)
returns bigint language sql immutable as $$
    select hashtextextended(p_prefix || '/' || p_family || '/' || p_name, 1879)
$$;

-- Takes the record's lock, unless another transaction holds it (then false): for a sweep of
-- others' expired rows, which skips a record in use.
create or replace function breakerbox_fleet_try_lock(p_prefix text, p_family text, p_name text)
returns boolean language sql volatile as $$
    select pg_try_advisory_xact_lock(breakerbox_fleet_lock_key(p_prefix, p_family, p_name))
$$;

-- Takes the record's lock until the end of the transaction, and deletes it if it has expired.
create or replace function breakerbox_fleet_lock(p_prefix text, p_family text, p_name text,
    p_now bigint)
returns void language plpgsql as $$
begin
    perform pg_advisory_xact_lock(breakerbox_fleet_lock_key(p_prefix, p_family, p_name));
    delete from breakerbox_fleet_records
        where prefix = p_prefix and family = p_family and name_md5 = md5(p_name)
            and name = p_name and expires_at <= p_now;
end
$$;

-- Takes the record's lock (`breakerbox_fleet_lock`), then reads its row: every field null for
-- none.
create or replace function breakerbox_fleet_locked_record(p_prefix text, p_family text,
    p_name text, p_now bigint)
returns breakerbox_fleet_records language plpgsql as $$
declare
    r breakerbox_fleet_records%rowtype;
begin
    perform breakerbox_fleet_lock(p_prefix, p_family, p_name, p_now);
    select * into r from breakerbox_fleet_records where prefix = p_prefix
        and family = p_family and name_md5 = md5(p_name) and name = p_name;
    return r;
end
$$;

-- The record `r` as a write or a report answers before it changes anything, at `p_now`: not
-- changed, and for no record epoch 0, closed, and nothing in the other fields.
create or replace function breakerbox_fleet_as_found(r breakerbox_fleet_records, p_now bigint,
    out o_changed boolean, out o_epoch bigint, out o_state text, out o_open_until bigint,
    out o_now bigint, out o_reopens bigint, out o_origin text, out o_reason text,
    out o_failure text)
language sql immutable as $$
    select false, coalesce(r.epoch, 0), coalesce(r.state, 'closed'), coalesce(r.open_until, 0),
        p_now, coalesce(r.reopens, 0), coalesce(r.origin, ''), coalesce(r.reason, ''),
        coalesce(r.last_failure, '')
$$;

-- Deletes up to 100 expired records of the prefix (and their counts) that no one else is
-- using: expired rows are gone for every read already; this keeps them from piling up.
create or replace function breakerbox_fleet_sweep(p_prefix text, p_now bigint)
returns void language sql as $$
    with gone as (
        delete from breakerbox_fleet_records
        where prefix = p_prefix and expires_at <= p_now and (family, name) in (
            select family, name from breakerbox_fleet_records
            where prefix = p_prefix and expires_at <= p_now
                and breakerbox_fleet_try_lock(prefix, family, name)
            limit 100
            for update skip locked)
        returning family, name, epoch)
    delete from breakerbox_fleet_counts c using gone
        where c.prefix = p_prefix and c.family = gone.family and c.name_md5 = md5(gone.name)
            and c.name = gone.name
        and c.epoch = gone.epoch
$$;

-- Drops the open keys of `p_families` whose record expired by `p_before`, but those in use
-- (as the sweep skips them).
create or replace function breakerbox_fleet_drop_open_keys(
    p_prefix text, p_families text[], p_before double precision)
returns void language sql as $$
    delete from breakerbox_fleet_open_keys
    where prefix = p_prefix and family = any(p_families) and expires_at <= p_before
        and (family, key) in (
            select family, key from breakerbox_fleet_open_keys
            where prefix = p_prefix and family = any(p_families) and expires_at <= p_before
                and breakerbox_fleet_try_lock(prefix, family, key)
            for update skip locked)
$$;

-- Sends a written record: the schema (`current_schema()`: fleets in several schemas of one
-- database share the channel), the prefix, the family, the name and the record's eight fields,
-- each `<length>:<text>`; a record too long for a notification (8000 bytes) is sent as the
-- schema, the prefix, the family and the name alone, for every instance to read it.
create or replace function breakerbox_fleet_publish(
    p_prefix text, p_family text, p_name text, p_epoch bigint, p_state text, p_open_until bigint,
    p_now bigint, p_reopens bigint, p_origin text, p_reason text, p_failure text)
returns void language plpgsql as $$
declare
    v text;
begin
    v := breakerbox_fleet_field(coalesce(current_schema(), ''))
        || breakerbox_fleet_field(p_prefix) || breakerbox_fleet_field(p_family)
        || breakerbox_fleet_field(p_name) || breakerbox_fleet_field(p_epoch::text)
            || breakerbox_fleet_field(p_state)
        || breakerbox_fleet_field(p_open_until::text) || breakerbox_fleet_field(p_now::text)
        || breakerbox_fleet_field(p_reopens::text) || breakerbox_fleet_field(p_origin)
        || breakerbox_fleet_field(p_reason) || breakerbox_fleet_field(p_failure);
    if octet_length(v) > 7900 then
        v := breakerbox_fleet_field(coalesce(current_schema(), ''))
            || breakerbox_fleet_field(p_prefix) || breakerbox_fleet_field(p_family)
            || breakerbox_fleet_field(p_name);
    end if;
    perform pg_notify('breakerbox_fleet', v);
end
$$;

-- Writes a record's new fields, changed at `p_now`, over its row or as a new one. It keeps the
-- row's expiry `p_expires` (null: never), unless the change is a family key's (`p_family` not
-- '', `p_life_ms` given): that one expires `p_life_ms` from now (0: never).
create or replace function breakerbox_fleet_put_record(
    p_prefix text, p_family text, p_name text, p_epoch bigint, p_state text,
    p_open_until bigint, p_reopens bigint, p_origin text, p_reason text, p_failure text,
    p_now bigint, p_expires bigint, p_life_ms bigint)
returns void language plpgsql as $$
declare
    v_expires bigint := p_expires;
begin
    if p_life_ms is not null and p_family <> '' then
        v_expires := case when p_life_ms > 0 then p_now + p_life_ms end;
    end if;
    insert into breakerbox_fleet_records (prefix, family, name, epoch, state, open_until, reopens,
            origin, reason, last_failure, changed_at, expires_at)
        values (p_prefix, p_family, p_name, p_epoch, p_state, p_open_until, p_reopens, p_origin,
            p_reason, p_failure, p_now, v_expires)
        on conflict (prefix, family, name_md5) do update set name = excluded.name,
            epoch = excluded.epoch,
            state = excluded.state, open_until = excluded.open_until,
            reopens = excluded.reopens, origin = excluded.origin, reason = excluded.reason,
            last_failure = excluded.last_failure, changed_at = excluded.changed_at,
            expires_at = excluded.expires_at;
end
$$;

-- record.lua: writes a change over any record (`p_force`) or only over the epoch `p_seen`
-- (0: no record). A family key's change (`p_family` not '', `p_life_ms` given) expires
-- `p_life_ms` from now (0: never) and keeps its family's open keys. Returns the record after the
-- call (`o_changed`: written by it; epoch 0 and closed for none) and the server's time.
create or replace function breakerbox_fleet_write(
    p_prefix text, p_family text, p_name text, p_force boolean, p_seen bigint, p_state text,
        p_open_ms bigint,
    p_reopens bigint, p_reason text, p_failure text, p_instance text,
    p_life_ms bigint,
    out o_changed boolean, out o_epoch bigint, out o_state text, out o_open_until bigint,
    out o_now bigint, out o_reopens bigint, out o_origin text, out o_reason text,
    out o_failure text)
language plpgsql as $$
declare
    v_now bigint := breakerbox_fleet_now();
    r breakerbox_fleet_records%rowtype;
begin
    r := breakerbox_fleet_locked_record(p_prefix, p_family, p_name, v_now);
    select * into o_changed, o_epoch, o_state, o_open_until, o_now, o_reopens, o_origin,
        o_reason, o_failure from breakerbox_fleet_as_found(r, v_now);
    if not p_force and o_epoch <> p_seen then
        return;
    end if;
    o_changed := true;
    o_epoch := greatest(o_epoch + 1, v_now);
    o_state := p_state;
    o_open_until := case when p_state = 'open' then v_now + p_open_ms else 0 end;
    o_reopens := p_reopens;
    o_origin := p_instance;
    o_reason := p_reason;
    o_failure := p_failure;
    perform breakerbox_fleet_put_record(p_prefix, p_family, p_name, o_epoch, o_state,
        o_open_until, o_reopens, o_origin, o_reason, o_failure, v_now, r.expires_at, p_life_ms);
    if p_life_ms is not null and p_family <> '' then
        perform breakerbox_fleet_drop_open_keys(p_prefix, array[p_family], v_now);
        if p_state = 'closed' then
            delete from breakerbox_fleet_open_keys
                where prefix = p_prefix and family = p_family and key_md5 = md5(p_name)
                    and key = p_name;
        else
            insert into breakerbox_fleet_open_keys (prefix, family, key, expires_at)
                values (p_prefix, p_family, p_name, case when p_life_ms > 0
                    then (v_now + p_life_ms)::double precision
                    else 'Infinity'::double precision end)
                on conflict (prefix, family, key_md5) do update set key = excluded.key,
                    expires_at = excluded.expires_at;
        end if;
        perform breakerbox_fleet_sweep(p_prefix, v_now);
    end if;
    -- A new record ends the probe leases of the last one.
    delete from breakerbox_fleet_leases where prefix = p_prefix and family = p_family
        and name_md5 = md5(p_name) and name = p_name;
    perform breakerbox_fleet_publish(p_prefix, p_family, p_name, o_epoch, o_state, o_open_until,
        v_now,
        o_reopens, o_origin, o_reason, o_failure);
end
$$;

-- probe.lua: half-open probe leases of the open record `p_epoch`, at most `p_limit` at once,
-- each `<holder>#<n>` for `p_life_ms`. Returns (n, life): n leases granted (every free one, at
-- least `p_fewest`, or the holder's own, renewed); (0, wait): ask again in `wait` ms; (0, -1):
-- the record is no longer that open epoch.
create or replace function breakerbox_fleet_lease(
    p_prefix text, p_family text, p_name text, p_epoch bigint, p_limit integer, p_life_ms bigint,
    p_holder text, p_fewest integer, out o_leases integer, out o_ms bigint)
language plpgsql as $$
declare
    v_now bigint := breakerbox_fleet_now();
    r breakerbox_fleet_records%rowtype;
    v_held text[];
    v_free integer;
begin
    r := breakerbox_fleet_locked_record(p_prefix, p_family, p_name, v_now);
    o_leases := 0;
    if r.epoch is null or r.epoch <> p_epoch or r.state <> 'open' then
        o_ms := -1;
        return;
    end if;
    if v_now < r.open_until then
        o_ms := r.open_until - v_now;
        return;
    end if;
    -- Expired leases: the record's own, and others' not in use.
    delete from breakerbox_fleet_leases
    where prefix = p_prefix and expires_at <= v_now and (family, name, holder) in (
        select family, name, holder from breakerbox_fleet_leases
        where prefix = p_prefix and expires_at <= v_now
            and breakerbox_fleet_try_lock(prefix, family, name)
        for update skip locked);
    v_held := array(select holder from breakerbox_fleet_leases
        where prefix = p_prefix and family = p_family and name_md5 = md5(p_name)
            and name = p_name and holder = any(array(
            select p_holder || '#' || g from generate_series(1, p_limit) g)));
    if cardinality(v_held) = 0 then
        v_free := p_limit - (select count(*) from breakerbox_fleet_leases
            where prefix = p_prefix and family = p_family and name_md5 = md5(p_name)
                and name = p_name);
        if v_free >= p_fewest then
            v_held := array(select p_holder || '#' || g from generate_series(1, v_free) g);
        end if;
    end if;
    if cardinality(v_held) > 0 then
        insert into breakerbox_fleet_leases (prefix, family, name, holder, expires_at)
            select p_prefix, p_family, p_name, h, v_now + p_life_ms from unnest(v_held) h
            on conflict (prefix, family, name_md5, holder) do update set name = excluded.name,
                expires_at = excluded.expires_at;
        o_leases := cardinality(v_held);
        o_ms := p_life_ms;
        return;
    end if;
    o_ms := greatest(coalesce((select min(expires_at) from breakerbox_fleet_leases
        where prefix = p_prefix and family = p_family and name_md5 = md5(p_name)
            and name = p_name) - v_now, 1), 1);
end
$$;

-- count.lua: adds a batch of judged calls to the fleet's window of the record `p_epoch` (a
-- batch of another record is dropped: (0, 0, 0)), and trips a closed record (or none) once
-- the window holds `p_min_calls` calls at a failure rate of `p_rate` percent. Returns
-- (tripped, calls, failures) of the window.
create or replace function breakerbox_fleet_count(
    p_prefix text, p_family text, p_name text, p_calls bigint, p_failures bigint,
        p_window_ms bigint,
    p_bucket_ms bigint, p_min_calls bigint, p_rate bigint, p_open_ms bigint, p_instance text,
    p_epoch bigint, out o_tripped integer, out o_calls bigint, out o_failures bigint)
language plpgsql as $$
declare
    v_now bigint := breakerbox_fleet_now();
    v_bucket bigint := v_now / p_bucket_ms;
    v_first bigint := v_bucket - p_window_ms / p_bucket_ms + 1;
    r breakerbox_fleet_records%rowtype;
    v_epoch bigint;
    v_reason text;
begin
    r := breakerbox_fleet_locked_record(p_prefix, p_family, p_name, v_now);
    v_epoch := coalesce(r.epoch, 0);
    o_tripped := 0;
    o_calls := 0;
    o_failures := 0;
    -- Counted under an older record, or left the window: gone.
    delete from breakerbox_fleet_counts where prefix = p_prefix and family = p_family
        and name_md5 = md5(p_name) and name = p_name
        and (epoch <> v_epoch or bucket < v_first);
    if p_epoch <> v_epoch then
        return;
    end if;
    if p_calls > 0 then
        insert into breakerbox_fleet_counts (prefix, family, name, bucket, epoch, calls, failures)
            values (p_prefix, p_family, p_name, v_bucket, v_epoch, p_calls, p_failures)
            on conflict (prefix, family, name_md5, bucket) do update
            set calls = breakerbox_fleet_counts.calls + excluded.calls,
                failures = breakerbox_fleet_counts.failures + excluded.failures;
    end if;
    select coalesce(sum(calls), 0), coalesce(sum(failures), 0) into o_calls, o_failures
        from breakerbox_fleet_counts where prefix = p_prefix and family = p_family
            and name_md5 = md5(p_name) and name = p_name;
    if o_calls < p_min_calls or o_failures * 100 < p_rate * o_calls then
        return;
    end if;
    if r.state is not null and r.state <> 'closed' then
        return;
    end if;
    v_epoch := greatest(v_epoch + 1, v_now);
    v_reason := 'fleet failure rate ' || (o_failures * 100 / o_calls) || '%';
    insert into breakerbox_fleet_records (prefix, family, name, epoch, state, open_until, reopens,
            origin, reason, last_failure, changed_at, expires_at)
        values (p_prefix, p_family, p_name, v_epoch, 'open', v_now + p_open_ms, 0, p_instance,
            v_reason,
            '', v_now, null)
        on conflict (prefix, family, name_md5) do update set name = excluded.name,
            epoch = excluded.epoch,
            state = excluded.state, open_until = excluded.open_until,
            reopens = excluded.reopens, origin = excluded.origin, reason = excluded.reason,
            last_failure = excluded.last_failure, changed_at = excluded.changed_at;
    -- The window's counts belong to the record that ended.
    delete from breakerbox_fleet_counts where prefix = p_prefix and family = p_family
        and name_md5 = md5(p_name) and name = p_name;
    perform breakerbox_fleet_publish(p_prefix, p_family, p_name, v_epoch, 'open', v_now + p_open_ms,
        v_now, 0, p_instance, v_reason, '');
    o_tripped := 1;
end
$$;

-- quorum.lua: a local trip reported under a quorum (`<n>` or `<p>%`), over the closed record
-- `p_seen` the reporter saw. The report lasts `p_open_ms` and counts for that epoch; the live
-- instances are the reporter and those of `p_live` whose beat (`p_expiries`) has not expired.
-- Once the open reports of live instances reach the quorum, the record opens. Returns the
-- record as breakerbox_fleet_write does, whether the report was taken, and the tally.
create or replace function breakerbox_fleet_report(
    p_prefix text, p_family text, p_name text, p_seen bigint, p_open_ms bigint, p_reopens bigint,
    p_reason text, p_failure text, p_instance text, p_quorum text, p_live text[],
    p_expiries bigint[], p_life_ms bigint,
    out o_changed boolean, out o_epoch bigint, out o_state text, out o_open_until bigint,
    out o_now bigint, out o_reopens bigint, out o_origin text, out o_reason text,
    out o_failure text, out o_taken boolean, out o_open integer, out o_needed integer,
    out o_live integer)
language plpgsql as $$
declare
    v_now bigint := breakerbox_fleet_now();
    r breakerbox_fleet_records%rowtype;
    v_alive text[];
begin
    r := breakerbox_fleet_locked_record(p_prefix, p_family, p_name, v_now);
    select * into o_changed, o_epoch, o_state, o_open_until, o_now, o_reopens, o_origin,
        o_reason, o_failure from breakerbox_fleet_as_found(r, v_now);
    o_taken := false;
    o_open := 0;
    o_needed := 0;
    o_live := 0;
    if o_epoch <> p_seen or o_state <> 'closed' then
        return;
    end if;
    v_alive := array[p_instance];
    for i in 1 .. coalesce(array_length(p_live, 1), 0) loop
        if not (p_live[i] = any(v_alive)) and p_expiries[i] > v_now then
            v_alive := v_alive || p_live[i];
        end if;
    end loop;
    o_live := cardinality(v_alive);
    insert into breakerbox_fleet_reports (prefix, family, name, epoch, instance, expires_at)
        values (p_prefix, p_family, p_name, o_epoch, p_instance, v_now + p_open_ms)
        on conflict (prefix, family, name_md5, epoch, instance) do update
        set expires_at = excluded.expires_at;
    -- Expired reports: the record's own, and others' not in use.
    delete from breakerbox_fleet_reports
    where prefix = p_prefix and expires_at <= v_now and (family, name, epoch, instance) in (
        select family, name, epoch, instance from breakerbox_fleet_reports
        where prefix = p_prefix and expires_at <= v_now
            and breakerbox_fleet_try_lock(prefix, family, name)
        for update skip locked);
    select count(*) into o_open from breakerbox_fleet_reports
        where prefix = p_prefix and family = p_family and name_md5 = md5(p_name)
            and name = p_name and epoch = o_epoch
        and instance = any(v_alive);
    if right(p_quorum, 1) = '%' then
        o_needed := ceil(left(p_quorum, -1)::numeric * o_live / 100);
    else
        o_needed := least(p_quorum::integer, o_live);
    end if;
    o_needed := greatest(o_needed, 1);
    o_taken := true;
    if o_open < o_needed then
        return;
    end if;
    o_changed := true;
    o_epoch := greatest(o_epoch + 1, v_now);
    o_state := 'open';
    o_open_until := v_now + p_open_ms;
    o_reopens := p_reopens;
    o_origin := p_instance;
    o_reason := 'quorum: ' || o_open || ' of ' || o_live || ' instances open (' || p_reason
        || ')';
    o_failure := p_failure;
    perform breakerbox_fleet_put_record(p_prefix, p_family, p_name, o_epoch, o_state,
        o_open_until, o_reopens, o_origin, o_reason, o_failure, v_now, r.expires_at, p_life_ms);
    delete from breakerbox_fleet_leases where prefix = p_prefix and family = p_family
        and name_md5 = md5(p_name) and name = p_name;
    delete from breakerbox_fleet_reports where prefix = p_prefix and family = p_family
        and name_md5 = md5(p_name) and name = p_name;
    if p_life_ms is not null and p_family <> '' then
        perform breakerbox_fleet_drop_open_keys(p_prefix, array[p_family], v_now);
        insert into breakerbox_fleet_open_keys (prefix, family, key, expires_at)
            values (p_prefix, p_family, p_name, (v_now + p_life_ms)::double precision)
            on conflict (prefix, family, key_md5) do update set key = excluded.key,
                    expires_at = excluded.expires_at;
    end if;
    perform breakerbox_fleet_publish(p_prefix, p_family, p_name, o_epoch, o_state, o_open_until,
        v_now,
        o_reopens, o_origin, o_reason, o_failure);
end
$$;

-- heartbeat.lua: the instance is live for `p_life_ms`, holding `p_states`; the expired are
-- dropped. Returns every live instance, with the server's time.
create or replace function breakerbox_fleet_beat(
    p_prefix text, p_instance text, p_life_ms bigint, p_states text)
returns table (o_now bigint, o_instance text, o_expires bigint, o_states text)
language plpgsql as $$
declare
    v_now bigint := breakerbox_fleet_now();
begin
    insert into breakerbox_fleet_live (prefix, instance, expires_at, states)
        values (p_prefix, p_instance, v_now + p_life_ms, p_states)
        on conflict (prefix, instance) do update
        set expires_at = excluded.expires_at, states = excluded.states;
    -- The expired, but those another beat is deleting (or writing): never waited for.
    delete from breakerbox_fleet_live
    where prefix = p_prefix and expires_at <= v_now and instance in (
        select l.instance from breakerbox_fleet_live l
        where l.prefix = p_prefix and l.expires_at <= v_now
        for update skip locked);
    return query select v_now, l.instance, l.expires_at, l.states
        from breakerbox_fleet_live l where l.prefix = p_prefix and l.expires_at > v_now
        order by l.instance;
end
$$;

-- Drops the open keys of `p_families` whose record expired by `p_before` (but those in use),
-- and up to 100 expired records.
create or replace function breakerbox_fleet_tidy(
    p_prefix text, p_families text[], p_before bigint)
returns void language plpgsql as $$
begin
    perform breakerbox_fleet_drop_open_keys(p_prefix, p_families, p_before);
    perform breakerbox_fleet_sweep(p_prefix, breakerbox_fleet_now());
end
$$;
