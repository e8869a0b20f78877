//! `cronbox group`: executor groups — listed (a tenant sees those it may
//! use), set as AUTO (the executors that register) or MANUAL (listed
//! addresses), and granted to tenants. Setting and granting are the
//! operator's.

use cronbox_api::GroupSpec;

use super::*;

/// List executor groups; the operator sets them and grants them to tenants.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox group list
  cronbox group set batch                                   # AUTO: executors that register in it
  cronbox group set legacy --manual http://127.0.0.1:9998   # MANUAL: these addresses, in order
  cronbox group grant batch acme beta                       # who may put jobs in it ('*': everyone)")]
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
    /// Set a group: AUTO by default, or MANUAL with --manual addresses.
    Set {
        name: String,
        /// The group's addresses, in order (makes it MANUAL).
        #[arg(long, value_delimiter = ',', num_args = 1..)]
        manual: Vec<String>,
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
                &["NAME", "TYPE", "ADDRESSES", "TENANTS"],
                |group| {
                    vec![
                        group.name.clone(),
                        group.address_type.clone(),
                        group.addresses.join(","),
                        group.tenants.join(","),
                    ]
                },
            ),
            GroupCommand::Set { name, manual } => {
                let spec = GroupSpec {
                    address_type: if manual.is_empty() { "AUTO" } else { "MANUAL" }.to_owned(),
                    addresses: manual,
                };
                let group = client.put_group(&name, &spec).await?;
                show(json, &group, |group| {
                    outln!("group {} set: {}", group.name, group.address_type);
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
