//! The replies read through the wrapper, filtered as their bytes arrive:
//! one element at a time, with the aggregates still open on a stack, so a
//! skipped part (an entry's fields, a long string) is counted past without
//! being kept, and what is handed on is always well-formed RESP.

use std::collections::VecDeque;

use super::sent::{ReadPlan, Shape};
use crate::vocab::ROWS_KEPT;

/// The longest bulk string kept; longer ones become nulls.
pub(super) const BULK_BOUND: usize = 64 * 1024;

/// The longest line (a simple string, an error, a number, a length) a reply
/// may have: an error names at most a key and a group, each within
/// [`BULK_BOUND`] (longer ones are never asked about).
pub(super) const LINE_BOUND: usize = 4 * BULK_BOUND;

/// The extended `XPENDING` replies of at most this many rows (the pending
/// summary's look at a group's oldest entries) hand their holders' names on:
/// they name the consumer holding a poison or orphaned entry. Longer pages
/// (the PEL scan's) hand them on as nulls.
const NAMED_ROWS: u64 = 10;

/// The longest holder's name handed on (the longest label value the
/// exporter writes by default); a longer one becomes a null.
const NAME_BOUND: u64 = 1024;

/// The deepest nesting of aggregates a reply may have: the exporter's
/// deepest (`CLUSTER SHARDS`, `CLUSTER SLOTS`) nest four deep.
pub(super) const DEPTH_BOUND: usize = 8;

/// The field names of `XINFO STREAM` whose values are entries.
const ENTRY_FIELDS: [&[u8]; 2] = [b"first-entry", b"last-entry"];

/// Which field list an aggregate read as [`Kind::Fields`] is: what its
/// field names make of the values after them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldList {
    /// `XINFO STREAM`.
    StreamInfo,
    /// `XINFO STREAM … FULL`.
    FullStream,
    /// One group of `XINFO STREAM … FULL`.
    FullGroup,
}

/// What the value after a field name is read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    Keep,
    /// An entry, handed on as its ID.
    Entry,
    /// Handed on as a null, counted past.
    Nulled,
    /// `XINFO STREAM … FULL`'s groups.
    Groups,
}

impl FieldList {
    /// What the value after the field named `key` is read as.
    fn value_of(self, key: &[u8]) -> Value {
        match self {
            FieldList::StreamInfo if ENTRY_FIELDS.contains(&key) => Value::Entry,
            FieldList::FullStream if key == b"entries" => Value::Nulled,
            FieldList::FullStream if key == b"groups" => Value::Groups,
            FieldList::FullGroup if key == b"pending" || key == b"consumers" => Value::Nulled,
            _ => Value::Keep,
        }
    }
}

/// The bytes of a field name kept to recognise [`ENTRY_FIELDS`].
const KEY_BYTES: usize = 16;

/// What is done with one element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Handed on.
    Keep,
    /// Counted past, nothing handed on.
    Skip,
    /// An entry `[id, fields]`: handed on as its ID.
    Entry,
    /// A field name of a field list: handed on, and read to know what its
    /// value is.
    Key,
    /// Handed on as a null, counted past.
    Nulled,
    /// `XINFO STREAM … FULL`'s groups.
    Groups,
    /// One of them: a field list.
    Group,
    /// The consumer holding a pending entry: an empty name (an entry
    /// released by `XNACK`) is handed on, any other as a null but in a
    /// reply of at most [`NAMED_ROWS`] rows.
    Owner,
    /// A row of the extended `XPENDING`: `[id, consumer, idle, count]`.
    Row,
    /// The summary `XPENDING`'s list of `[consumer, count]` pairs.
    Holders,
    /// One of those pairs.
    Pair,
    /// The reply of a command queued in a transaction, inside `EXEC`'s
    /// array: read by that command's plan.
    Queued(u64),
}

/// What an open aggregate's elements are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Keep,
    Skip,
    /// `XRANGE`'s array: every element is an entry.
    Entries,
    /// An entry, its header held back: the ID is handed on, the rest
    /// skipped.
    Entry,
    /// A field list of `XINFO STREAM`; `next` is what the last name read
    /// makes of the value after it.
    Fields {
        of: FieldList,
        next: Value,
    },
    /// `XINFO STREAM … FULL`'s groups, the first [`ROWS_KEPT`] handed on.
    FullGroups,
    /// The extended `XPENDING`'s rows.
    Rows,
    /// One row.
    Row,
    /// The summary `XPENDING`: `[count, min, max, holders]`.
    Summary,
    /// Its holders, the first [`ROWS_KEPT`] handed on.
    Holders,
    /// `XINFO GROUPS`' or `XINFO CONSUMERS`' rows, the first [`ROWS_KEPT`]
    /// handed on.
    Cut,
    /// One holder.
    Pair,
    /// `EXEC`'s array: its `index`th element is the reply of the
    /// `index`th queued command.
    Exec,
}

/// An aggregate still open.
#[derive(Debug)]
struct Frame {
    kind: Kind,
    /// Elements still to come.
    left: u64,
    /// Elements read so far.
    index: u64,
}

/// Where the filter is inside the current element.
#[derive(Clone, Copy, Debug)]
enum Token {
    /// At the type byte of the next element.
    Start,
    /// In the number after a length-prefixed type byte.
    Number {
        ty: u8,
        role: Role,
        negative: bool,
        digits: bool,
        value: u64,
        cr: bool,
        len: usize,
    },
    /// In a line (a simple string, an error, an integer, ...), up to its
    /// `\n`.
    Line { keep: bool, len: usize },
    /// In a string's bytes (`body`), then its `\r\n` (`crlf` left).
    Payload {
        body: u64,
        crlf: u8,
        keep: bool,
        key: bool,
    },
}

/// The read side of a connection.
#[derive(Debug)]
pub(super) struct Replies {
    /// The plans of the commands written whose replies have not begun.
    pub(super) plans: VecDeque<ReadPlan>,
    /// The plan of the reply being read.
    plan: Option<ReadPlan>,
    stack: Vec<Frame>,
    token: Token,
    /// The field name just read (its first [`KEY_BYTES`]).
    key: Vec<u8>,
    /// Set by the first violation; every later read fails with it.
    broken: Option<String>,
}

impl Default for Replies {
    fn default() -> Self {
        Replies {
            plans: VecDeque::new(),
            plan: None,
            stack: Vec::with_capacity(DEPTH_BOUND),
            token: Token::Start,
            key: Vec::with_capacity(KEY_BYTES),
            broken: None,
        }
    }
}

impl Replies {
    /// Runs `input` through the filter, appending what is handed on to
    /// `out`.
    ///
    /// # Errors
    /// A protocol violation (see the module's doc), which every later call
    /// returns too.
    pub(super) fn filter(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        if let Some(broken) = &self.broken {
            return Err(broken.clone());
        }
        self.run(input, out)
            .inspect_err(|e| self.broken = Some(e.clone()))
    }

    fn run(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        while let Some(&byte) = input.first() {
            match self.token {
                Token::Start => {
                    input = &input[1..];
                    if self.plan.is_none() {
                        let plan = self.plans.pop_front();
                        self.plan = Some(plan.unwrap_or_else(|| ReadPlan::plain(String::new())));
                    }
                    let role = self.role();
                    self.start(byte, role, out)?;
                }
                Token::Number { .. } => {
                    input = &input[1..];
                    self.number_byte(byte, out)?;
                }
                Token::Line { keep, len } => {
                    let (line, ends) = match input.iter().position(|&b| b == b'\n') {
                        Some(end) => (&input[..=end], true),
                        None => (input, false),
                    };
                    let len = len + line.len();
                    if len > LINE_BOUND {
                        return Err(
                            self.violation(format!("a line longer than {} KiB", LINE_BOUND / 1024))
                        );
                    }
                    if keep {
                        out.extend_from_slice(line);
                    }
                    input = &input[line.len()..];
                    if ends {
                        self.token = Token::Start;
                        self.done();
                    } else {
                        self.token = Token::Line { keep, len };
                    }
                }
                Token::Payload {
                    body,
                    crlf,
                    keep,
                    key,
                } if body > 0 => {
                    let take = input.len().min(usize::try_from(body).unwrap_or(usize::MAX));
                    if keep {
                        out.extend_from_slice(&input[..take]);
                    }
                    if key {
                        let room = KEY_BYTES.saturating_sub(self.key.len());
                        self.key.extend_from_slice(&input[..take.min(room)]);
                    }
                    input = &input[take..];
                    self.token = Token::Payload {
                        body: body - take as u64,
                        crlf,
                        keep,
                        key,
                    };
                }
                Token::Payload { crlf, keep, .. } => {
                    input = &input[1..];
                    let expected = if crlf == 2 { b'\r' } else { b'\n' };
                    if byte != expected {
                        return Err(self.violation(
                            "a string whose bytes do not end where its length says".into(),
                        ));
                    }
                    if keep {
                        out.push(byte);
                    }
                    if crlf == 2 {
                        self.token = Token::Payload {
                            body: 0,
                            crlf: 1,
                            keep,
                            key: false,
                        };
                    } else {
                        self.token = Token::Start;
                        self.done();
                    }
                }
            }
        }
        Ok(())
    }

    /// What is done with the element about to start.
    fn role(&mut self) -> Role {
        let role = match self.stack.last() {
            None => Role::Keep,
            Some(frame) => match frame.kind {
                Kind::Keep => Role::Keep,
                Kind::Skip => Role::Skip,
                Kind::Entries => Role::Entry,
                Kind::Entry if frame.index == 0 => Role::Keep,
                Kind::Entry => Role::Skip,
                Kind::Fields { .. } if frame.index % 2 == 0 => Role::Key,
                Kind::Fields { next, .. } => match next {
                    Value::Keep => Role::Keep,
                    Value::Entry => Role::Entry,
                    Value::Nulled => Role::Nulled,
                    Value::Groups => Role::Groups,
                },
                Kind::FullGroups if frame.index >= ROWS_KEPT => Role::Skip,
                Kind::FullGroups => Role::Group,
                Kind::Rows => Role::Row,
                Kind::Cut | Kind::Holders if frame.index >= ROWS_KEPT => Role::Skip,
                Kind::Cut => Role::Keep,
                Kind::Row if frame.index == 1 => Role::Owner,
                Kind::Summary if frame.index == 3 => Role::Holders,
                Kind::Holders => Role::Pair,
                Kind::Pair if frame.index == 0 => Role::Owner,
                Kind::Row | Kind::Summary | Kind::Pair => Role::Keep,
                Kind::Exec => Role::Queued(frame.index),
            },
        };
        if role == Role::Key {
            self.key.clear();
        }
        role
    }

    /// An element of type `ty` starts.
    fn start(&mut self, ty: u8, role: Role, out: &mut Vec<u8>) -> Result<(), String> {
        let role = if role == Role::Nulled {
            out.extend_from_slice(b"$-1\r\n");
            Role::Skip
        } else {
            role
        };
        match ty {
            b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'_' => {
                let keep = role != Role::Skip;
                if keep {
                    out.push(ty);
                }
                self.token = Token::Line { keep, len: 1 };
                Ok(())
            }
            b'$' | b'=' | b'!' | b'*' | b'%' | b'~' | b'>' | b'|' => {
                self.token = Token::Number {
                    ty,
                    role,
                    negative: false,
                    digits: false,
                    value: 0,
                    cr: false,
                    len: 1,
                };
                Ok(())
            }
            other => {
                Err(self.violation(format!("byte 0x{other:02x} where an element should start")))
            }
        }
    }

    /// One byte of a length (leading zeros and all), then its `\r\n`.
    fn number_byte(&mut self, byte: u8, out: &mut Vec<u8>) -> Result<(), String> {
        let Token::Number {
            ty,
            role,
            mut negative,
            mut digits,
            mut value,
            mut cr,
            len,
        } = self.token
        else {
            return Ok(());
        };
        let len = len + 1;
        if len > LINE_BOUND {
            return Err(self.violation(format!(
                "a length line longer than {} KiB",
                LINE_BOUND / 1024
            )));
        }
        match byte {
            b'\n' if cr => {
                let n = if negative { -1 } else { value as i64 };
                self.token = Token::Start;
                return self.sized(ty, role, n, out);
            }
            b'-' if !negative && !digits && !cr => negative = true,
            b'0'..=b'9' if !cr => {
                value = value
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(byte - b'0')))
                    .filter(|&v| v <= i64::MAX as u64)
                    .ok_or_else(|| self.violation("a length beyond 2^63".into()))?;
                digits = true;
            }
            b'\r' if digits && !cr => cr = true,
            _ => {
                return Err(self.violation(format!(
                    "a length that is not a number after '{}'",
                    char::from(ty)
                )));
            }
        }
        self.token = Token::Number {
            ty,
            role,
            negative,
            digits,
            value,
            cr,
            len,
        };
        Ok(())
    }

    /// The length `n` of an element of type `ty` is known (negative: a
    /// null).
    fn sized(&mut self, ty: u8, role: Role, n: i64, out: &mut Vec<u8>) -> Result<(), String> {
        if matches!(ty, b'$' | b'=' | b'!') {
            self.string(ty, role, n, out);
            return Ok(());
        }
        if n < 0 {
            if !matches!(ty, b'*' | b'~') {
                return Err(self.violation(format!("a negative length after '{}'", char::from(ty))));
            }
            if role != Role::Skip {
                out.extend_from_slice(b"*-1\r\n");
            }
            self.done();
            return Ok(());
        }
        let n = n as u64;
        let count = match ty {
            b'%' => n.checked_mul(2),
            b'|' => n.checked_mul(2).and_then(|c| c.checked_add(1)),
            _ => Some(n),
        }
        .ok_or_else(|| self.violation("an aggregate beyond 2^64 elements".into()))?;
        if self.stack.len() >= DEPTH_BOUND {
            return Err(self.violation(format!("aggregates nested deeper than {DEPTH_BOUND}")));
        }
        let kind = match role {
            // A nulled element is read as skipped (its null is handed on).
            Role::Skip | Role::Nulled => Kind::Skip,
            // An empty entry is passed on for the decoder to refuse.
            Role::Entry if count == 0 => {
                header(out, ty, n);
                Kind::Keep
            }
            // Its header is held back: the ID alone stands for it.
            Role::Entry => Kind::Entry,
            Role::Keep | Role::Key | Role::Owner => {
                let kind = self.top_kind(ty, count)?;
                header(out, ty, shown(kind, n));
                kind
            }
            Role::Queued(i) => {
                let queued = self.plan.as_ref().and_then(|p| p.queued.get(i as usize));
                let kind = match queued {
                    Some(plan) => self.kind_for(plan, ty, count)?,
                    None => Kind::Keep,
                };
                header(out, ty, shown(kind, n));
                kind
            }
            Role::Holders if ty == b'*' => {
                header(out, ty, n.min(ROWS_KEPT));
                Kind::Holders
            }
            // Only an array is a list of groups, and only a list of pairs
            // a group's fields; anything else is handed on for the decoder
            // to refuse.
            Role::Groups if ty == b'*' => {
                header(out, ty, n.min(ROWS_KEPT));
                Kind::FullGroups
            }
            Role::Group if matches!(ty, b'*' | b'%') && count % 2 == 0 => {
                header(out, ty, n);
                Kind::Fields {
                    of: FieldList::FullGroup,
                    next: Value::Keep,
                }
            }
            Role::Groups | Role::Group => {
                header(out, ty, n);
                Kind::Keep
            }
            Role::Row | Role::Holders | Role::Pair => {
                header(out, ty, n);
                match role {
                    Role::Row => Kind::Row,
                    Role::Holders => Kind::Holders,
                    _ => Kind::Pair,
                }
            }
        };
        if count == 0 {
            self.done();
        } else {
            self.stack.push(Frame {
                kind,
                left: count,
                index: 0,
            });
        }
        Ok(())
    }

    /// What the elements of a kept aggregate of `count` are: the reply's
    /// own array reads by its plan, the aggregates inside it as they are.
    fn top_kind(&self, ty: u8, count: u64) -> Result<Kind, String> {
        let Some(plan) = self.plan.as_ref().filter(|_| self.stack.is_empty()) else {
            return Ok(Kind::Keep);
        };
        self.kind_for(plan, ty, count)
    }

    /// What the elements of an aggregate of type `ty` and `count` elements
    /// answering `plan` are.
    fn kind_for(&self, plan: &ReadPlan, ty: u8, count: u64) -> Result<Kind, String> {
        if let (Shape::Entries | Shape::Rows, Some(limit)) = (plan.shape, plan.limit)
            && count > limit
        {
            return Err(self.violation(format!(
                "{count} elements where COUNT asked for at most {limit}"
            )));
        }
        Ok(match plan.shape {
            Shape::Entries => Kind::Entries,
            Shape::StreamInfo => Kind::Fields {
                of: FieldList::StreamInfo,
                next: Value::Keep,
            },
            Shape::StreamFull => Kind::Fields {
                of: FieldList::FullStream,
                next: Value::Keep,
            },
            Shape::Rows => Kind::Rows,
            Shape::Summary => Kind::Summary,
            Shape::Exec => Kind::Exec,
            // Only an array is a list of rows (a map's elements pair up).
            Shape::Cut if ty == b'*' => Kind::Cut,
            Shape::Cut | Shape::Plain => Kind::Keep,
        })
    }

    /// A string of `n` bytes (negative: a null) starts.
    fn string(&mut self, ty: u8, role: Role, n: i64, out: &mut Vec<u8>) {
        let skip = role == Role::Skip;
        if n < 0 {
            if !skip {
                out.extend_from_slice(b"$-1\r\n");
            }
            self.done();
            return;
        }
        let n = n as u64;
        // An owner's name is read only in a short page of rows (whose
        // holders a culprit is named from); elsewhere only whether there is
        // one.
        let named = role == Role::Owner && n <= NAME_BOUND && self.names_holders();
        let keep = !skip && n <= BULK_BOUND as u64 && (role != Role::Owner || n == 0 || named);
        if keep {
            header(out, ty, n);
        } else if !skip {
            // Too long to keep: a null in its place.
            out.extend_from_slice(b"$-1\r\n");
        }
        self.token = Token::Payload {
            body: n,
            crlf: 2,
            keep,
            key: keep && role == Role::Key,
        };
    }

    /// Whether the row being read belongs to a reply of at most
    /// [`NAMED_ROWS`] rows of the extended `XPENDING`.
    fn names_holders(&self) -> bool {
        let in_row = self.stack.last().is_some_and(|f| f.kind == Kind::Row);
        let short = self
            .plan
            .as_ref()
            .is_some_and(|p| p.shape == Shape::Rows && p.limit.is_some_and(|l| l <= NAMED_ROWS));
        in_row && short
    }

    /// The current element is complete: the aggregates it completes are
    /// closed, and so is the reply when nothing is left open.
    fn done(&mut self) {
        loop {
            let Some(frame) = self.stack.last_mut() else {
                self.plan = None;
                return;
            };
            if let Kind::Fields { of, next } = &mut frame.kind {
                *next = if frame.index % 2 == 0 {
                    of.value_of(&self.key)
                } else {
                    Value::Keep
                };
            }
            frame.index += 1;
            frame.left -= 1;
            if frame.left > 0 {
                return;
            }
            self.stack.pop();
        }
    }

    /// A violation of the protocol, named with the reply it is in.
    fn violation(&self, what: String) -> String {
        match self.plan.as_ref().map(|p| p.command.as_str()) {
            Some(command) if !command.is_empty() => format!("reply to {command}: {what}"),
            _ => format!("reply: {what}"),
        }
    }
}

/// The length said for an aggregate of `n` elements read as `kind`.
fn shown(kind: Kind, n: u64) -> u64 {
    match kind {
        Kind::Cut | Kind::FullGroups => n.min(ROWS_KEPT),
        _ => n,
    }
}

/// Writes the header of an element of type `ty` and length `n` in its plain
/// form (whatever zeros led the length on the wire).
fn header(out: &mut Vec<u8>, ty: u8, n: u64) {
    out.push(ty);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}
