-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)
--
-- Host: 127.0.0.1    Database: xxl_job
-- ------------------------------------------------------
-- An xxl-job 2.4 installation's executors and jobs, as `mysqldump xxl_job
-- xxl_job_group xxl_job_info` writes them (the tests' import fixture).

/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;
/*!40101 SET NAMES utf8mb4 */;

--
-- Table structure for table `xxl_job_group`
--

DROP TABLE IF EXISTS `xxl_job_group`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
CREATE TABLE `xxl_job_group` (
  `id` int NOT NULL AUTO_INCREMENT,
  `app_name` varchar(64) NOT NULL COMMENT '执行器AppName',
  `title` varchar(12) NOT NULL COMMENT '执行器名称',
  `address_type` tinyint NOT NULL DEFAULT '0' COMMENT '执行器地址类型：0=自动注册、1=手动录入',
  `address_list` text COMMENT '执行器地址列表，多地址逗号分隔',
  `update_time` datetime DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB AUTO_INCREMENT=3 DEFAULT CHARSET=utf8mb4;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `xxl_job_group` WRITE;
/*!40000 ALTER TABLE `xxl_job_group` DISABLE KEYS */;
INSERT INTO `xxl_job_group` VALUES (1,'order-service','订单服务',0,NULL,'2026-11-01 10:00:00'),(2,'report-service','报表',1,'http://127.0.0.1:9998/,http://127.0.0.1:9997/','2026-11-01 10:00:00');
/*!40000 ALTER TABLE `xxl_job_group` ENABLE KEYS */;
UNLOCK TABLES;

--
-- Table structure for table `xxl_job_info`
--

DROP TABLE IF EXISTS `xxl_job_info`;
CREATE TABLE `xxl_job_info` (
  `id` int NOT NULL AUTO_INCREMENT,
  `job_group` int NOT NULL COMMENT '执行器主键ID',
  `job_desc` varchar(255) NOT NULL,
  `add_time` datetime DEFAULT NULL,
  `update_time` datetime DEFAULT NULL,
  `author` varchar(64) DEFAULT NULL COMMENT '作者',
  `alarm_email` varchar(255) DEFAULT NULL COMMENT '报警邮件',
  `schedule_type` varchar(50) NOT NULL DEFAULT 'NONE' COMMENT '调度类型',
  `schedule_conf` varchar(128) DEFAULT NULL COMMENT '调度配置，值含义取决于调度类型',
  `misfire_strategy` varchar(50) NOT NULL DEFAULT 'DO_NOTHING' COMMENT '调度过期策略',
  `executor_route_strategy` varchar(50) DEFAULT NULL COMMENT '执行器路由策略',
  `executor_handler` varchar(255) DEFAULT NULL COMMENT '执行器任务handler',
  `executor_param` varchar(512) DEFAULT NULL COMMENT '执行器任务参数',
  `executor_block_strategy` varchar(50) DEFAULT NULL COMMENT '阻塞处理策略',
  `executor_timeout` int NOT NULL DEFAULT '0' COMMENT '任务执行超时时间，单位秒',
  `executor_fail_retry_count` int NOT NULL DEFAULT '0' COMMENT '失败重试次数',
  `glue_type` varchar(50) NOT NULL COMMENT 'GLUE类型',
  `glue_source` mediumtext COMMENT 'GLUE源代码',
  `glue_remark` varchar(128) DEFAULT NULL COMMENT 'GLUE备注',
  `glue_updatetime` datetime DEFAULT NULL COMMENT 'GLUE更新时间',
  `child_jobid` varchar(255) DEFAULT NULL COMMENT '子任务ID，多个逗号分隔',
  `trigger_status` tinyint NOT NULL DEFAULT '0' COMMENT '调度状态：0-停止，1-运行',
  `trigger_last_time` bigint NOT NULL DEFAULT '0' COMMENT '上次调度时间',
  `trigger_next_time` bigint NOT NULL DEFAULT '0' COMMENT '下次调度时间',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB AUTO_INCREMENT=6 DEFAULT CHARSET=utf8mb4;

LOCK TABLES `xxl_job_info` WRITE;
INSERT INTO `xxl_job_info` VALUES (1,1,'nightly orders','2026-11-01 10:00:00','2026-11-01 10:00:00','XXL','ops@example.com','CRON','0 0 2 * * ?','DO_NOTHING','FIRST','orderJobHandler','{\"full\": true}','SERIAL_EXECUTION',600,2,'BEAN','','GLUE代码初始化','2026-11-01 10:00:00','2,5',1,0,0),(2,1,'after orders','2026-11-01 10:00:00','2026-11-01 10:00:00','XXL','','NONE','','DO_NOTHING','ROUND','afterHandler','it\'s done','DISCARD_LATER',0,0,'BEAN','','GLUE代码初始化','2026-11-01 10:00:00','',0,0,0),(3,1,'shell cleanup','2026-11-01 10:00:00','2026-11-01 10:00:00','XXL','','CRON','0 */5 * * * ?','DO_NOTHING','FIRST','','','SERIAL_EXECUTION',0,0,'GLUE_SHELL','#!/bin/bash\necho \"cleanup\"\nexit 0','GLUE代码初始化','2026-11-01 10:00:00','',1,0,0),(4,2,'hourly report','2026-11-01 10:00:00','2026-11-01 10:00:00','XXL','','FIX_RATE','3600','FIRE_ONCE_NOW','FAILOVER','reportHandler','','COVER_EARLY',30,1,'BEAN','','GLUE代码初始化','2026-11-01 10:00:00','',1,0,0),(5,2,'hourly report','2026-11-01 10:00:00','2026-11-01 10:00:00','XXL','','CRON','0 30 * * * ?','DO_NOTHING','FIRST','reportHandler','second','SERIAL_EXECUTION',30,0,'BEAN','','GLUE代码初始化','2026-11-01 10:00:00','',0,0,0);
UNLOCK TABLES;
/*!40101 SET CHARACTER_SET_CLIENT=@OLD_CHARACTER_SET_CLIENT */;
