//! The re-run's pace, read from the recording: the person's pause before each act, the time they left a
//! field's focus to work before typing, and how fast they typed, each capped so that a person who paused
//! for a minute costs a re-run seconds, not a minute.
//!
//! The rule: before a call, the re-run waits until at least the person's pause before it has passed since
//! its previous act was done (the pause counted from the end of the person's previous call, `end_ts`, to
//! the start of this one, `ts`), at most [`PAUSE_CAP`]. Typing that a click into the field began waits as
//! long after that click as the person did before their first key (`typing_ts`), at most [`PAUSE_CAP`],
//! then presses its keys at the person's pace (their typing's duration spread over its characters), the
//! whole typing taking at most [`TYPING_CAP`]. Waiting for the page itself (the network, its timers, its
//! document) is the driver's, before every call whatever the pace says.

use std::time::Duration;

use trace_manifest::trajectory::ToolCall;

/// The longest pause the re-run keeps of the person's: long enough for what a pause lets happen on
/// real sites (a debounce of 250 ms, an autosave 1.5 s after the last key), short enough that a
/// recording with long pauses re-runs in about the time of its acts.
pub const PAUSE_CAP: Duration = Duration::from_secs(2);
/// The longest a re-run spends typing one call's text, whatever the person took.
pub const TYPING_CAP: Duration = Duration::from_secs(2);

/// How long the person paused between the end of `previous` and the start of `next`, capped.
pub fn pause_between(previous: &ToolCall, next: &ToolCall) -> Duration {
    capped_ms(next.ts - previous.end_ts.unwrap_or(previous.ts), PAUSE_CAP)
}

/// For typing that a click into its field began: how long the person waited after the click before their
/// first key, capped; zero for any other call.
pub fn pause_before_typing(call: &ToolCall) -> Duration {
    call.typing_ts.map_or(Duration::ZERO, |first_key| capped_ms(first_key - call.ts, PAUSE_CAP))
}

/// The time between two keys of `call`'s typing of `characters` characters: the person's typing's
/// duration spread over them, the whole at most [`TYPING_CAP`]. Zero where the text came at once (a
/// paste, an autofill) or the recording does not say.
pub fn key_interval(call: &ToolCall, characters: usize) -> Duration {
    let (Some(end), Some(gaps)) = (call.end_ts, characters.checked_sub(1).filter(|gaps| *gaps > 0)) else {
        return Duration::ZERO;
    };
    let first_key = call.typing_ts.unwrap_or(call.ts);
    capped_ms(end - first_key, TYPING_CAP) / gaps as u32
}

/// `ms` milliseconds as a duration from zero to `cap` (a negative or unreadable one is zero).
fn capped_ms(ms: f64, cap: Duration) -> Duration {
    if ms.is_finite() && ms > 0.0 { Duration::from_secs_f64(ms / 1000.0).min(cap) } else { Duration::ZERO }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_manifest::trajectory::ToolAction;

    fn call(ts: f64, typing_ts: Option<f64>, end_ts: Option<f64>) -> ToolCall {
        ToolCall {
            action: ToolAction::Input { text: "HashMap".into() },
            target: None,
            tab: Some(0),
            url_before: None,
            url_after: None,
            dom_snapshot: None,
            screenshot: None,
            event_ids: Vec::new(),
            ts,
            end_ts,
            typing_ts,
        }
    }

    #[test]
    fn the_persons_pauses_are_kept_up_to_the_cap() {
        let typed = call(1_000.0, Some(2_500.0), Some(3_200.0));
        // The person clicked the search box and waited 1.5 s for what the focus loads before typing.
        assert_eq!(pause_before_typing(&typed), Duration::from_millis(1_500));
        // Then typed seven characters in 0.7 s.
        assert_eq!(key_interval(&typed, 7), Duration::from_millis(700) / 6);
        // A slider left to send its value, then a button: the pause between them counts from the last key.
        assert_eq!(pause_between(&typed, &call(4_600.0, None, None)), Duration::from_millis(1_400));
        // A minute's pause, or a minute of typing, costs the cap.
        assert_eq!(pause_between(&typed, &call(63_200.0, None, None)), PAUSE_CAP);
        assert_eq!(key_interval(&call(0.0, None, Some(60_000.0)), 11), TYPING_CAP / 10);
        assert_eq!(pause_before_typing(&call(0.0, Some(90_000.0), None)), PAUSE_CAP);
    }

    #[test]
    fn what_the_recording_does_not_say_costs_no_wait() {
        // Trajectories from before calls said when they ended: the pause counts from the previous call's start.
        assert_eq!(pause_between(&call(1_000.0, None, None), &call(1_300.0, None, None)), Duration::from_millis(300));
        // Text that came at once, one character, typing without a click, clocks that disagree.
        assert_eq!(key_interval(&call(1_000.0, None, Some(1_000.0)), 12), Duration::ZERO);
        assert_eq!(key_interval(&call(1_000.0, None, Some(1_500.0)), 1), Duration::ZERO);
        assert_eq!(key_interval(&call(1_000.0, None, None), 12), Duration::ZERO);
        assert_eq!(pause_before_typing(&call(1_000.0, None, Some(1_500.0))), Duration::ZERO);
        assert_eq!(pause_between(&call(2_000.0, None, None), &call(1_990.0, None, None)), Duration::ZERO);
    }
}
