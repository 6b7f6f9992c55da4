//! The Lua scripts, each one atomic step with no decision logic, and the
//! reading of their replies.

use std::time::Duration;

use redis::Value;

use crate::store::StoreError;

/// `{now_s, now_us, value}`.
pub(super) const READ: &str = r"
local t = redis.call('TIME')
return {t[1], t[2], redis.call('GET', KEYS[1])}
";

/// Replaces KEYS[1] with ARGV[2] (TTL ARGV[3] ms) if it still holds ARGV[1]
/// ('' for absent). `{1, now_s, now_us}` or `{0, now_s, now_us, current}`.
pub(super) const CAS: &str = r"
local cur = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
if (cur or '') == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return {1, t[1], t[2]}
end
return {0, t[1], t[2], cur}
";

/// Takes the lease KEYS[1] for token ARGV[1], TTL ARGV[2] ms; first frees it
/// if it still holds ARGV[3], this process's own lease whose release has
/// not reached Redis yet. 1 if taken (or already ours: this process's
/// re-assertion got there first), 0 if held by another task.
///
/// With ARGV[4] > 0 (failing closed, the restart grace in ms): while Redis
/// has been up for less than that, leases lost in a restart may not have
/// been re-asserted by their holders yet, so nothing is given out; the reply
/// is then minus the ms left of the grace. `uptime_in_seconds` is whole
/// seconds, possibly rounded up: one second is taken off.
pub(super) const ACQUIRE: &str = r"
local grace = tonumber(ARGV[4])
if grace > 0 then
  local up = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)')) or 0
  local up_ms = math.max(up - 1, 0) * 1000
  if up_ms < grace then
    return -(grace - up_ms)
  end
end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if ARGV[3] ~= '' and cur == ARGV[3] then
  redis.call('DEL', KEYS[1])
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return 0
";

/// Re-asserts this process's leases: for the i-th lease, KEYS[2i-1] is
/// set to token ARGV[2i] with TTL ARGV[2i+1] ms if it is absent (lost in a
/// restart or a flush), unless KEYS[2i], the mark a release leaves for that
/// token, says it was released meanwhile. Nothing is set once Redis's clock
/// is past ARGV[1] (ms): a re-assertion that waited longer than a mark
/// lives could no longer see it. `{lost, now_s, now_us}` with the number of
/// keys found held by another token (not counting a lease whose release's
/// mark is there: released after the chunk was listed, and taken since),
/// or `{-1, now_s, now_us}` when too late.
pub(super) const REASSERT: &str = r"
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[1]) then
  return {-1, t[1], t[2]}
end
local lost = 0
for i = 1, #KEYS, 2 do
  local token = ARGV[i + 1]
  local cur = redis.call('GET', KEYS[i])
  if not cur then
    if redis.call('EXISTS', KEYS[i + 1]) == 0 then
      redis.call('SET', KEYS[i], token, 'PX', ARGV[i + 2])
    end
  elseif cur ~= token and redis.call('EXISTS', KEYS[i + 1]) == 0 then
    lost = lost + 1
  end
end
return {lost, t[1], t[2]}
";

/// Releases leases: for the i-th, deletes the lease KEYS[2i-1] if it holds
/// token ARGV[2i-1]; when ARGV[2i] is `1`, first marks that token released
/// (KEYS[2i], for ARGV[#KEYS+1] ms, whether or not the lease was there:
/// Redis may have lost it in a restart), so that a re-assertion of it sent
/// before the release cannot set it again. The number of leases deleted.
pub(super) const RELEASE: &str = r"
local deleted = 0
for i = 1, #KEYS, 2 do
  if ARGV[i + 1] == '1' then
    redis.call('SET', KEYS[i + 1], '1', 'PX', ARGV[#KEYS + 1])
  end
  if redis.call('GET', KEYS[i]) == ARGV[i] then
    deleted = deleted + redis.call('DEL', KEYS[i])
  end
end
return deleted
";

/// Deletes the lease KEYS[1] if it holds token ARGV[1] (on a cluster, after
/// the release's mark was set by a command of its own).
pub(super) const RELEASE_ONE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// Reads `{.., now_s, now_us, value?}` starting at `at`.
pub(super) fn parse_time_and_value(
    reply: &[Value],
    at: usize,
) -> Result<(Duration, Option<String>), StoreError> {
    let num = |v: Option<&Value>| -> Option<u64> {
        match v? {
            Value::Int(i) => u64::try_from(*i).ok(),
            Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    };
    let bad = || StoreError::new("redis: unexpected reply");
    let secs = num(reply.get(at)).ok_or_else(bad)?;
    let micros = num(reply.get(at + 1)).ok_or_else(bad)?;
    let value = match reply.get(at + 2) {
        Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    Ok((
        Duration::from_secs(secs) + Duration::from_micros(micros),
        value,
    ))
}
