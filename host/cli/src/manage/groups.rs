//! `cronbox group`: executor groups — listed (a tenant sees those it may
//! use), set as AUTO (the executors that register) or MANUAL (listed
//! addresses), and granted to tenants. Setting and granting are the
//! operator's.

use cronbox_api::{GroupSpec, LegacySpec};

use super::*;

/// List executor groups; the operator sets them and grants them to tenants.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox group list
  cronbox group set batch                                   # AUTO: executors that register in it
  cronbox group set fixed --manual http://127.0.0.1:9998    # MANUAL: these addresses, in order
  cronbox group grant batch acme beta                       # who may put jobs in it ('*': everyone)
  cronbox group set my-app --legacy xxl-job-3.4 --access-token T   # xxl-job executors of appname my-app")]
pub struct GroupArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: GroupCommand,
}

#[derive(Debug, Subcommand)]
enum GroupCommand {
    /// The groups you may use (the operator: every group, with its
    /// addresses and tenants).
    List,
    /// Set a group: AUTO by default, or MANUAL with --manual addresses;
    /// with --legacy, a group of xxl-job executors.
    Set {
        name: String,
        /// The group's addresses, in order (makes it MANUAL).
        #[arg(long, value_delimiter = ',', num_args = 1..)]
        manual: Vec<String>,
        /// Make it a legacy group: its executors are xxl-job executors of
        /// this release line (xxl-job-3.4: up to 3.4; xxl-job-3.5), whose
        /// appname is the group's name.
        #[arg(long, value_name = "PROTOCOL", requires = "access_token")]
        legacy: Option<cronbox_api::LegacyProtocol>,
        /// A legacy group's access token (`xxl.job.accessToken` of its
        /// executors; default: the CRONBOX_XXL_JOB_TOKEN variable).
        #[arg(long, env = "CRONBOX_XXL_JOB_TOKEN", hide_env_values = true)]
        access_token: Option<String>,
    },
    /// Set the tenants that may put jobs in a group (replacing those
    /// before; '*' is every tenant).
    Grant {
        name: String,
        #[arg(required = true, value_name = "TENANT")]
        tenants: Vec<String>,
    },
}

pub fn group(args: GroupArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            GroupCommand::List => print_list(
                json,
                &client.groups().await?,
                &["NAME", "TYPE", "ADDRESSES", "TENANTS", "LEGACY"],
                |group| {
                    vec![
                        group.name.clone(),
                        group.address_type.clone(),
                        group.addresses.join(","),
                        group.tenants.join(","),
                        group
                            .legacy
                            .map_or_else(String::new, |protocol| protocol.as_str().to_owned()),
                    ]
                },
            ),
            GroupCommand::Set {
                name,
                manual,
                legacy,
                access_token,
            } => {
                let spec = GroupSpec {
                    address_type: if manual.is_empty() { "AUTO" } else { "MANUAL" }.to_owned(),
                    addresses: manual,
                    legacy: legacy.map(|protocol| LegacySpec {
                        protocol,
                        access_token: access_token.unwrap_or_default(),
                    }),
                };
                let group = client.put_group(&name, &spec).await?;
                show(json, &group, |group| match group.legacy {
                    Some(protocol) => outln!(
                        "group {} set: {}, xxl-job executors ({})",
                        group.name,
                        group.address_type,
                        protocol.as_str()
                    ),
                    None => outln!("group {} set: {}", group.name, group.address_type),
                })
            }
            GroupCommand::Grant { name, tenants } => {
                let group = client.grant_group(&name, &tenants).await?;
                show(json, &group, |group| {
                    outln!(
                        "group {} granted to {}",
                        group.name,
                        group.tenants.join(", ")
                    );
                })
            }
        }
    })
}
