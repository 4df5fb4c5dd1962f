//! The commands written through the wrapper, read as they pass so that each
//! reply's [`ReadPlan`] (its shape, its `COUNT`) is known before its first
//! byte arrives: the redis crate writes every command as a RESP array of
//! bulk strings, and the server answers in the order the commands were
//! written.

/// The arguments kept of each command: its name, `XINFO`'s subcommand and
/// the `COUNT` of `XRANGE`, `XREVRANGE` and the extended `XPENDING`.
const KEPT_ARGS: usize = 6;

/// The bytes kept of each of those arguments (enough for a name or a
/// number).
const KEPT_BYTES: usize = 24;

/// What a reply is read as, chosen from the command it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ReadPlan {
    /// How its elements are read.
    pub(super) shape: Shape,
    /// The command, for messages (`XRANGE`, `XINFO STREAM`, ...).
    pub(super) command: String,
    /// The most entries or rows the reply may hold (the command's `COUNT`).
    pub(super) limit: Option<u64>,
    /// For `EXEC`: the plans of the commands queued since `MULTI`, one per
    /// element of its array.
    pub(super) queued: Vec<ReadPlan>,
}

/// The shapes of replies the wrapper reads differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// Passed on (long strings aside).
    Plain,
    /// `XRANGE`/`XREVRANGE`: an array of entries, each handed on as its ID.
    Entries,
    /// `XINFO STREAM`: a field list whose `first-entry` and `last-entry`
    /// are handed on as their IDs.
    StreamInfo,
    /// `XINFO STREAM … FULL`: a field list whose `entries` are handed on
    /// as a null and whose `groups` (cut at
    /// [`ROWS_KEPT`](crate::vocab::ROWS_KEPT)) are field lists with their
    /// `pending` and `consumers` handed on as nulls: only the groups' own
    /// figures are read, whatever the PELs and consumers hold.
    StreamFull,
    /// The extended `XPENDING`: an array of rows, at most `COUNT`, whose
    /// consumers are handed on as nulls (an empty name, released by
    /// `XNACK`, as it is).
    Rows,
    /// The summary `XPENDING`: its consumers' names alike, and its holders
    /// cut at [`ROWS_KEPT`](crate::vocab::ROWS_KEPT).
    Summary,
    /// `XINFO GROUPS`, `XINFO CONSUMERS`: an array of rows cut at
    /// [`ROWS_KEPT`](crate::vocab::ROWS_KEPT).
    Cut,
    /// `EXEC`: an array whose elements are the replies of the queued
    /// commands, each read by its own plan.
    Exec,
}

impl ReadPlan {
    /// A reply passed on (long strings aside), answering `command`.
    pub(super) fn plain(command: String) -> ReadPlan {
        ReadPlan {
            shape: Shape::Plain,
            command,
            limit: None,
            queued: Vec::new(),
        }
    }
}

/// Where the reader is in the written bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// At the `*` of the next command.
    Start,
    /// In the argument count.
    Count,
    /// At the `$` of the next argument.
    ArgStart,
    /// In an argument's length.
    Len,
    /// In an argument's bytes and their `\r\n`.
    Payload { left: u64 },
    /// Something that is not a command was written: from now on every
    /// reply is read as [`Shape::Plain`].
    Lost,
}

/// The reader of written commands.
#[derive(Debug)]
pub(super) struct Sent {
    state: State,
    number: u64,
    args_left: u64,
    arg: usize,
    args: Vec<Vec<u8>>,
    /// Inside `MULTI`: the plans of the commands queued so far (each is
    /// answered `+QUEUED` now, and within `EXEC`'s reply later).
    queued: Option<Vec<ReadPlan>>,
}

impl Default for Sent {
    fn default() -> Self {
        Sent {
            state: State::Start,
            number: 0,
            args_left: 0,
            arg: 0,
            args: Vec::with_capacity(KEPT_ARGS),
            queued: None,
        }
    }
}

impl Sent {
    /// Whether the written bytes stopped looking like commands.
    pub(super) fn lost(&self) -> bool {
        self.state == State::Lost
    }

    /// Reads `bytes` (written, in order) and appends the plan of each
    /// command they complete to `plans`.
    pub(super) fn feed(&mut self, mut bytes: &[u8], plans: &mut impl Extend<ReadPlan>) {
        while let Some(&byte) = bytes.first() {
            match self.state {
                State::Lost => return,
                State::Start => {
                    self.state = if byte == b'*' {
                        State::Count
                    } else {
                        State::Lost
                    };
                    self.number = 0;
                    bytes = &bytes[1..];
                }
                State::Count | State::Len => {
                    bytes = &bytes[1..];
                    match byte {
                        b'0'..=b'9' => {
                            self.number = self
                                .number
                                .saturating_mul(10)
                                .saturating_add(u64::from(byte - b'0'));
                        }
                        b'\r' => {}
                        b'\n' if self.state == State::Count => {
                            self.args_left = self.number;
                            self.arg = 0;
                            self.args.clear();
                            self.state = State::ArgStart;
                            if self.args_left == 0 {
                                plans.extend([self.next_plan()]);
                                self.state = State::Start;
                            }
                        }
                        b'\n' => {
                            self.state = State::Payload {
                                left: self.number.saturating_add(2),
                            };
                            if self.arg < KEPT_ARGS {
                                self.args.push(Vec::new());
                            }
                        }
                        _ => self.state = State::Lost,
                    }
                }
                State::ArgStart => {
                    self.state = if byte == b'$' {
                        State::Len
                    } else {
                        State::Lost
                    };
                    self.number = 0;
                    bytes = &bytes[1..];
                }
                State::Payload { left } => {
                    let take = bytes.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    if let Some(kept) = self.args.get_mut(self.arg) {
                        // The argument's own bytes, not its `\r\n`.
                        let body =
                            take.min(usize::try_from(left.saturating_sub(2)).unwrap_or(usize::MAX));
                        let room = KEPT_BYTES.saturating_sub(kept.len());
                        kept.extend_from_slice(&bytes[..body.min(room)]);
                    }
                    bytes = &bytes[take..];
                    let left = left - take as u64;
                    if left > 0 {
                        self.state = State::Payload { left };
                        continue;
                    }
                    self.arg += 1;
                    self.args_left -= 1;
                    if self.args_left == 0 {
                        plans.extend([self.next_plan()]);
                        self.state = State::Start;
                    } else {
                        self.state = State::ArgStart;
                    }
                }
            }
        }
    }

    /// The plan of the reply that answers the command just read: inside a
    /// transaction, its `+QUEUED`, and for `EXEC` the queued commands'
    /// plans in order.
    fn next_plan(&mut self) -> ReadPlan {
        let plan = self.plan();
        match (plan.command.as_str(), self.queued.as_mut()) {
            ("MULTI", _) => {
                self.queued = Some(Vec::new());
                plan
            }
            ("EXEC", Some(_)) => ReadPlan {
                shape: Shape::Exec,
                queued: self.queued.take().unwrap_or_default(),
                ..plan
            },
            ("DISCARD", Some(_)) => {
                self.queued = None;
                plan
            }
            (_, Some(queued)) => {
                let command = plan.command.clone();
                queued.push(plan);
                ReadPlan::plain(command)
            }
            _ => plan,
        }
    }

    /// The plan of the command just read.
    fn plan(&self) -> ReadPlan {
        let word = |i: usize| -> String {
            self.args
                .get(i)
                .map(|a| String::from_utf8_lossy(a).to_ascii_uppercase())
                .unwrap_or_default()
        };
        let count =
            |i: usize| -> Option<u64> { std::str::from_utf8(self.args.get(i)?).ok()?.parse().ok() };
        let name = word(0);
        match name.as_str() {
            "XRANGE" | "XREVRANGE" => ReadPlan {
                shape: Shape::Entries,
                limit: if word(4) == "COUNT" { count(5) } else { None },
                command: name,
                queued: Vec::new(),
            },
            // `XINFO STREAM key FULL …`: read for the groups' scalars only.
            "XINFO" if word(1) == "STREAM" && word(3) == "FULL" => ReadPlan {
                shape: Shape::StreamFull,
                command: "XINFO STREAM FULL".into(),
                limit: None,
                queued: Vec::new(),
            },
            "XINFO" if word(1) == "STREAM" => ReadPlan {
                shape: Shape::StreamInfo,
                command: "XINFO STREAM".into(),
                limit: None,
                queued: Vec::new(),
            },
            "XINFO" if matches!(word(1).as_str(), "GROUPS" | "CONSUMERS") => ReadPlan {
                shape: Shape::Cut,
                command: format!("XINFO {}", word(1)),
                limit: None,
                queued: Vec::new(),
            },
            // `XPENDING key group start end count`: the extended form.
            "XPENDING" if self.arg >= 6 => ReadPlan {
                shape: Shape::Rows,
                command: name,
                limit: count(5),
                queued: Vec::new(),
            },
            "XPENDING" => ReadPlan {
                shape: Shape::Summary,
                command: name,
                limit: None,
                queued: Vec::new(),
            },
            _ => ReadPlan::plain(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        out
    }

    fn plans(written: &[u8], step: usize) -> Vec<ReadPlan> {
        let mut sent = Sent::default();
        let mut plans = Vec::new();
        for piece in written.chunks(step) {
            sent.feed(piece, &mut plans);
        }
        plans
    }

    #[test]
    fn each_command_gets_its_plan_in_any_pieces() {
        let mut written = resp(&["TIME"]);
        written.extend(resp(&["XINFO", "STREAM", "orders"]));
        written.extend(resp(&["xinfo", "groups", "orders"]));
        written.extend(resp(&["XRANGE", "orders", "5-1", "9-0", "COUNT", "2001"]));
        written.extend(resp(&["XREVRANGE", "k", "+", "-", "COUNT", "1"]));
        written.extend(resp(&["XPENDING", "k", "g", "-", "+", "500"]));
        written.extend(resp(&["XPENDING", "k", "g"]));
        for step in [1, 2, 5, written.len()] {
            let got = plans(&written, step);
            let shapes: Vec<(Shape, Option<u64>)> =
                got.iter().map(|p| (p.shape, p.limit)).collect();
            assert_eq!(
                shapes,
                [
                    (Shape::Plain, None),
                    (Shape::StreamInfo, None),
                    (Shape::Cut, None),
                    (Shape::Entries, Some(2001)),
                    (Shape::Entries, Some(1)),
                    (Shape::Rows, Some(500)),
                    (Shape::Summary, None),
                ],
                "step {step}"
            );
            assert_eq!(got[1].command, "XINFO STREAM");
            assert_eq!(got[2].command, "XINFO GROUPS");
            assert_eq!(got[3].command, "XRANGE");
        }
    }

    #[test]
    fn long_arguments_are_passed_over_not_kept() {
        let key = "k".repeat(100_000);
        let written = resp(&["XRANGE", &key, "-", "+", "COUNT", "7"]);
        let mut sent = Sent::default();
        let mut got = Vec::new();
        sent.feed(&written, &mut got);
        assert_eq!(got[0].limit, Some(7));
        assert!(sent.args.iter().all(|a| a.len() <= KEPT_BYTES));
    }

    #[test]
    fn bytes_that_are_not_commands_stop_the_reading() {
        let mut sent = Sent::default();
        let mut got = Vec::new();
        sent.feed(b"PING\r\n", &mut got);
        assert!(sent.lost() && got.is_empty());
        sent.feed(&resp(&["XRANGE", "k", "-", "+"]), &mut got);
        assert!(got.is_empty());
    }
}
