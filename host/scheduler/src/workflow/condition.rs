//! An edge's `when`: a boolean expression over the workflow's input and
//! its ancestors' outputs, in a language as small as the templates': paths
//! (`nodes.check.output.count`, `input.mode`), literals (numbers, `"text"`
//! or `'text'`, `true`, `false`, `null`), comparisons (`==`, `!=`, `<`,
//! `<=`, `>`, `>=`), `!`, `&&`, `||` and parentheses. No calls, no
//! arithmetic. Equality compares JSON values (numbers by value); ordering
//! compares two numbers or two strings and refuses anything else. The
//! whole holds when its value is truthy: not `false`, `null`, `0`, `""`,
//! `[]` nor `{}`. A path that leads nowhere is an error naming it, never
//! false.

use std::borrow::Cow;

use serde_json::Value;

use super::path::{Path, PathError, Values};

/// Deepest nesting of parentheses and `!`.
const MAX_DEPTH: usize = 32;

/// A parsed condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    root: Expr,
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Literal(Value),
    Path(Path),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Compare(Box<Expr>, Op, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Why a condition does not parse or evaluate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    #[error("at byte {at}: {what}")]
    Syntax { at: usize, what: String },
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("{0}")]
    Compare(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Literal(Value),
    Path(String),
    Op(Op),
    Not,
    And,
    Or,
    Open,
    Close,
}

fn tokens(text: &str) -> Result<Vec<(usize, Token)>, ConditionError> {
    let syntax = |at: usize, what: &str| ConditionError::Syntax {
        at,
        what: what.to_owned(),
    };
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let two = text.get(i..i + 2).unwrap_or("");
        let (token, len) = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'(' => (Token::Open, 1),
            b')' => (Token::Close, 1),
            _ if two == "&&" => (Token::And, 2),
            _ if two == "||" => (Token::Or, 2),
            _ if two == "==" => (Token::Op(Op::Eq), 2),
            _ if two == "!=" => (Token::Op(Op::Ne), 2),
            _ if two == "<=" => (Token::Op(Op::Le), 2),
            _ if two == ">=" => (Token::Op(Op::Ge), 2),
            b'<' => (Token::Op(Op::Lt), 1),
            b'>' => (Token::Op(Op::Gt), 1),
            b'!' => (Token::Not, 1),
            b'"' | b'\'' => {
                let close = text[i + 1..]
                    .find(c as char)
                    .ok_or_else(|| syntax(i, "a string is not closed"))?;
                let body = &text[i + 1..i + 1 + close];
                (Token::Literal(Value::String(body.to_owned())), close + 2)
            }
            b'-' | b'0'..=b'9' => {
                let len = text[i..]
                    .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
                    .unwrap_or(text.len() - i);
                let number: serde_json::Number = text[i..i + len]
                    .parse()
                    .map_err(|_| syntax(i, &format!("{:?} is not a number", &text[i..i + len])))?;
                (Token::Literal(Value::Number(number)), len)
            }
            _ if c.is_ascii_alphabetic() => {
                let len = text[i..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
                    .unwrap_or(text.len() - i);
                let word = &text[i..i + len];
                let token = match word {
                    "true" => Token::Literal(Value::Bool(true)),
                    "false" => Token::Literal(Value::Bool(false)),
                    "null" => Token::Literal(Value::Null),
                    _ => Token::Path(word.to_owned()),
                };
                (token, len)
            }
            _ => {
                let found = text[i..].chars().next().unwrap_or(' ');
                return Err(syntax(i, &format!("unexpected {found:?}")));
            }
        };
        tokens.push((i, token));
        i += len;
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    next: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|(_, token)| token)
    }

    fn at(&self) -> usize {
        self.tokens.get(self.next).map_or(self.end, |(at, _)| *at)
    }

    fn error(&self, what: &str) -> ConditionError {
        ConditionError::Syntax {
            at: self.at(),
            what: what.to_owned(),
        }
    }

    fn or(&mut self, depth: usize) -> Result<Expr, ConditionError> {
        let mut left = self.and(depth)?;
        while self.peek() == Some(&Token::Or) {
            self.next += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and(depth)?));
        }
        Ok(left)
    }

    fn and(&mut self, depth: usize) -> Result<Expr, ConditionError> {
        let mut left = self.unary(depth)?;
        while self.peek() == Some(&Token::And) {
            self.next += 1;
            left = Expr::And(Box::new(left), Box::new(self.unary(depth)?));
        }
        Ok(left)
    }

    fn unary(&mut self, depth: usize) -> Result<Expr, ConditionError> {
        if depth > MAX_DEPTH {
            return Err(self.error(&format!("nested deeper than {MAX_DEPTH}")));
        }
        if self.peek() == Some(&Token::Not) {
            self.next += 1;
            return Ok(Expr::Not(Box::new(self.unary(depth + 1)?)));
        }
        let left = self.operand(depth)?;
        if let Some(&Token::Op(op)) = self.peek() {
            self.next += 1;
            let right = self.operand(depth)?;
            return Ok(Expr::Compare(Box::new(left), op, Box::new(right)));
        }
        Ok(left)
    }

    fn operand(&mut self, depth: usize) -> Result<Expr, ConditionError> {
        let Some((_, token)) = self.tokens.get(self.next).cloned() else {
            return Err(self.error("the expression ends where a value is expected"));
        };
        let expr = match token {
            Token::Literal(value) => Expr::Literal(value),
            Token::Path(written) => Expr::Path(Path::parse(&written)?),
            Token::Open => {
                self.next += 1;
                let inner = self.or(depth + 1)?;
                if self.peek() != Some(&Token::Close) {
                    return Err(self.error("a `(` is not closed"));
                }
                inner
            }
            _ => return Err(self.error("a value is expected here")),
        };
        self.next += 1;
        Ok(expr)
    }
}

impl Condition {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Condition, ConditionError> {
        let mut parser = Parser {
            tokens: tokens(text)?,
            next: 0,
            end: text.len(),
        };
        let root = parser.or(0)?;
        if parser.next < parser.tokens.len() {
            return Err(parser.error("an operator or the end is expected here"));
        }
        Ok(Condition { root })
    }

    /// Every path it reads.
    pub fn paths(&self) -> Vec<&Path> {
        fn walk<'e>(expr: &'e Expr, found: &mut Vec<&'e Path>) {
            match expr {
                Expr::Literal(_) => {}
                Expr::Path(path) => found.push(path),
                Expr::Not(inner) => walk(inner, found),
                Expr::And(left, right) | Expr::Or(left, right) | Expr::Compare(left, _, right) => {
                    walk(left, found);
                    walk(right, found);
                }
            }
        }
        let mut found = Vec::new();
        walk(&self.root, &mut found);
        found
    }

    /// Whether it holds for `values`.
    pub fn holds(&self, values: &Values<'_>) -> Result<bool, ConditionError> {
        Ok(truthy(eval(&self.root, values)?.as_ref()))
    }
}

/// The expression's value: a path's borrowed from `values`, a literal's
/// from the expression (nothing is copied but a comparison's answer).
fn eval<'e, 'v: 'e>(expr: &'e Expr, values: &Values<'v>) -> Result<Cow<'e, Value>, ConditionError> {
    let answer = |holds: bool| Cow::Owned(Value::Bool(holds));
    Ok(match expr {
        Expr::Literal(value) => Cow::Borrowed(value),
        Expr::Path(path) => path.read(values)?,
        Expr::Not(inner) => answer(!truthy(eval(inner, values)?.as_ref())),
        Expr::And(left, right) => {
            answer(truthy(eval(left, values)?.as_ref()) && truthy(eval(right, values)?.as_ref()))
        }
        Expr::Or(left, right) => {
            answer(truthy(eval(left, values)?.as_ref()) || truthy(eval(right, values)?.as_ref()))
        }
        Expr::Compare(left, op, right) => answer(compare(
            eval(left, values)?.as_ref(),
            *op,
            eval(right, values)?.as_ref(),
        )?),
    })
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(value) => *value,
        Value::Number(number) => number.as_f64() != Some(0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(fields) => !fields.is_empty(),
    }
}

fn compare(left: &Value, op: Op, right: &Value) -> Result<bool, ConditionError> {
    use std::cmp::Ordering;
    let ordering = match (left, right) {
        (Value::Number(a), Value::Number(b)) => a.as_f64().partial_cmp(&b.as_f64()),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => None,
    };
    Ok(match (op, ordering) {
        (Op::Eq, Some(ordering)) => ordering == Ordering::Equal,
        (Op::Ne, Some(ordering)) => ordering != Ordering::Equal,
        (Op::Eq, None) => left == right,
        (Op::Ne, None) => left != right,
        (Op::Lt, Some(ordering)) => ordering == Ordering::Less,
        (Op::Le, Some(ordering)) => ordering != Ordering::Greater,
        (Op::Gt, Some(ordering)) => ordering == Ordering::Greater,
        (Op::Ge, Some(ordering)) => ordering != Ordering::Less,
        (_, None) => {
            return Err(ConditionError::Compare(format!(
                "cannot order {} and {}: `<`, `<=`, `>`, `>=` compare two numbers or two strings",
                super::path::describe(left),
                super::path::describe(right)
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::path::Outputs;
    use super::*;
    use serde_json::json;

    fn holds(text: &str, input: Value, outputs: &[(&str, &str)]) -> Result<bool, ConditionError> {
        let outputs: Outputs = outputs.iter().copied().collect();
        Condition::parse(text)?.holds(&Values {
            input: &input,
            outputs: &outputs,
            item: None,
        })
    }

    #[test]
    fn comparisons_and_logic_over_outputs_and_input() {
        let check = [("check", r#"{"count": 3, "status": "ok", "rows": []}"#)];
        for (text, expected) in [
            ("nodes.check.output.count > 0", true),
            (
                "nodes.check.output.count >= 3 && nodes.check.output.count < 4",
                true,
            ),
            ("nodes.check.output.count == 3.0", true),
            ("nodes.check.output.status == 'ok'", true),
            ("nodes.check.output.status != \"ok\" || input.full", true),
            ("!(input.full) || nodes.check.output.rows", false),
            ("nodes.check.output.rows", false),
            ("input.mode == null", false),
            ("nodes.check.output.status < 'p'", true),
            ("nodes.check.output.count == '3'", false),
        ] {
            assert_eq!(
                holds(text, json!({"full": true, "mode": "x"}), &check),
                Ok(expected),
                "{text}"
            );
        }
        // A text output is a string.
        assert_eq!(
            holds(
                "nodes.say.output == 'hello there'",
                json!({}),
                &[("say", "hello there")]
            ),
            Ok(true)
        );
    }

    #[test]
    fn a_missing_field_or_a_bad_comparison_is_an_error_naming_it() {
        assert_eq!(
            holds(
                "nodes.check.output.rows > 0",
                json!({}),
                &[("check", r#"{"count": 3}"#)]
            )
            .unwrap_err()
            .to_string(),
            "`nodes.check.output.rows` is missing: no `rows` in an object with count"
        );
        assert!(
            holds("input.a < 3", json!({"a": "x"}), &[])
                .unwrap_err()
                .to_string()
                .starts_with("cannot order a string and a number")
        );
    }

    #[test]
    fn bad_expressions_are_refused_when_parsed_saying_where() {
        for (text, expected) in [
            (
                "input.a >",
                "at byte 9: the expression ends where a value is expected",
            ),
            ("(input.a", "at byte 8: a `(` is not closed"),
            (
                "input.a 3",
                "at byte 8: an operator or the end is expected here",
            ),
            ("input.a == 'x", "at byte 11: a string is not closed"),
            ("env.HOME", "`env.HOME` names nothing"),
            ("input.a + 1", "at byte 8: unexpected '+'"),
            ("&& input.a", "at byte 0: a value is expected here"),
        ] {
            let error = Condition::parse(text).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{text}: {error}");
        }
        let deep = format!("{}input.a{}", "(".repeat(40), ")".repeat(40));
        assert!(
            Condition::parse(&deep)
                .unwrap_err()
                .to_string()
                .contains("nested deeper than 32")
        );
    }
}
