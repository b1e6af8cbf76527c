-- breakerbox fleet on PostgreSQL: the tables (schema version 1), created where missing.
--
-- Every row is under a fleet's prefix (`FleetConfig::prefix`), so several fleets share one
-- database, and belongs to a breaker (`family` '', `name` the breaker's) or a shared family's
-- key (`family` the family's name, `name` the key). A key's text is the caller's, of any length,
-- longer than an index row may be (2,704 bytes): the primary keys hold its MD5 (`name_md5`,
-- `key_md5`, computed by the server), and every lookup compares the name too (two names of
-- one MD5, which only a deliberate collision makes, share a row: the last written holds it,
-- and the other reads as no record). Times are the server's, in ms since the Unix epoch
-- (`breakerbox_fleet_now()`); an `expires_at` in the past is a row that is no longer there
-- (deleted by the next statement that meets it).
create table if not exists breakerbox_fleet_schema (
    version integer not null
);

-- A shared breaker's record (`family` '') or a shared family's key's (`name` the key), as
-- record.lua keeps it in a hash. `expires_at` null: for ever.
create table if not exists breakerbox_fleet_records (
    prefix text not null,
    family text not null,
    name text not null,
    epoch bigint not null,
    state text not null,
    open_until bigint not null,
    reopens bigint not null,
    origin text not null,
    reason text not null,
    last_failure text not null,
    changed_at bigint not null,
    expires_at bigint,
    name_md5 text generated always as (md5(name)) stored,
    primary key (prefix, family, name_md5)
);
create index if not exists breakerbox_fleet_records_expiry
    on breakerbox_fleet_records (prefix, expires_at) where expires_at is not null;

-- A failure-rate breaker's fleet counts: a row per bucket, counted under the record's epoch.
create table if not exists breakerbox_fleet_counts (
    prefix text not null,
    family text not null,
    name text not null,
    bucket bigint not null,
    epoch bigint not null,
    calls bigint not null,
    failures bigint not null,
    name_md5 text generated always as (md5(name)) stored,
    primary key (prefix, family, name_md5, bucket)
);

-- Half-open probe leases: `<holder>#<n>`, each until `expires_at`.
create table if not exists breakerbox_fleet_leases (
    prefix text not null,
    family text not null,
    name text not null,
    holder text not null,
    expires_at bigint not null,
    name_md5 text generated always as (md5(name)) stored,
    primary key (prefix, family, name_md5, holder)
);

-- Open reports under a quorum: an instance's report over a record's epoch, until the end of
-- its open time.
create table if not exists breakerbox_fleet_reports (
    prefix text not null,
    family text not null,
    name text not null,
    epoch bigint not null,
    instance text not null,
    expires_at bigint not null,
    name_md5 text generated always as (md5(name)) stored,
    primary key (prefix, family, name_md5, epoch, instance)
);

-- The live instances: each one's last heartbeat, until `expires_at`, with the breakers it holds
-- other than closed (`<len>:<breaker><len>:<state>` each).
create table if not exists breakerbox_fleet_live (
    prefix text not null,
    instance text not null,
    expires_at bigint not null,
    states text not null,
    primary key (prefix, instance)
);

-- A shared family's keys whose record is not closed, with their record's expiry (`Infinity`
-- while it does not expire): what a re-read reads instead of every key.
create table if not exists breakerbox_fleet_open_keys (
    prefix text not null,
    family text not null,
    key text not null,
    expires_at double precision not null,
    key_md5 text generated always as (md5(key)) stored,
    primary key (prefix, family, key_md5)
);
