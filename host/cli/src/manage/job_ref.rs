//! A job named on the command line by its id or by its name (the name
//! `cronbox deploy` gives it): `cronbox job trigger 4` and `cronbox job
//! trigger hello-rs` alike. A number is an id; a name must be one job's.

use std::str::FromStr;

use super::*;

/// A job as the command line names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum JobRef {
    Id(JobId),
    Name(String),
}

impl FromStr for JobRef {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<JobRef, Self::Err> {
        Ok(match text.parse::<i64>() {
            Ok(id) => JobRef::Id(JobId(id)),
            Err(_) => JobRef::Name(text.to_owned()),
        })
    }
}

impl JobRef {
    /// The job's id: the one given, or that of the one job of this name
    /// the token sees.
    pub(super) async fn id(&self, client: &Client) -> anyhow::Result<JobId> {
        let name = match self {
            JobRef::Id(id) => return Ok(*id),
            JobRef::Name(name) => name,
        };
        let query = JobQuery {
            name: Some(name.clone()),
            limit: Some(2),
            ..JobQuery::default()
        };
        let found = client.jobs(&query).await?;
        match found.as_slice() {
            [one] => Ok(one.job.id),
            [] => bail!(
                "no job is named {name:?} (`cronbox job list` lists them; a number is taken as \
                 a job's id)"
            ),
            [first, second, ..] => bail!(
                "more than one job is named {name:?} (jobs {} and {} at least): name the job by \
                 its id",
                first.job.id,
                second.job.id
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_an_id_and_anything_else_a_name() {
        assert_eq!("42".parse::<JobRef>(), Ok(JobRef::Id(JobId(42))));
        assert_eq!(
            "hello-rs".parse::<JobRef>(),
            Ok(JobRef::Name("hello-rs".to_owned()))
        );
        assert_eq!(
            "日报 42".parse::<JobRef>(),
            Ok(JobRef::Name("日报 42".to_owned()))
        );
    }
}
